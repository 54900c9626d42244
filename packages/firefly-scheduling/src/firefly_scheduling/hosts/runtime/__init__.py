"""What every host shares to run fires: building, booting, executing and stopping.

* `boot` (`asyncio_boot`) validates the tasks and builds a `task_runtime.TaskRuntime`
  (`asyncio_runtime.AsyncTaskRuntime`), probing the backend (`probe`) first;
* `execute.execute_fire` is the one path from "a trigger fired" to the fire runner;
* `task_calls`, `task_objects`, `coroutine_loop`: calling a `def` or `async def` body;
* `workers`, `shutdown`, `clock`, `lock_safety`: pools, stopping, time and guards.
"""
