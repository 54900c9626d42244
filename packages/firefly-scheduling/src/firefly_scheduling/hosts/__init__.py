"""The hosts: where scheduled tasks actually run.

* `resident.ResidentHost` (`firefly-scheduling run`): a long-lived process on APScheduler.
* `tick.TickHost` (`firefly-scheduling tick`): one pass per minute, for crontab or a
  Kubernetes CronJob; what a pass did is its `tick_report.TickReport`.
* `library.register`: the library host, on an APScheduler scheduler the application runs.
* `asyncio_host.AsyncHost`: the tasks on the application's own event loop.

Three rooms serve them: `runtime` (boot, execute, stop), `apscheduler` (jobs and
triggers) and `observation` (observers, telemetry, health).

All three turn a trigger into a `Fire` (`firefly_scheduling.fires.outcome`) and call
`execute_fire` (`firefly_scheduling.hosts.runtime.execute`), the single path through the
initial-delay gate and the fire runner (claims, task lock, keep-alive, fencing, run
history). `run` and `tick` stop the same way on SIGTERM/SIGINT
(`firefly_scheduling.hosts.runtime.shutdown`).

Nothing is imported here, so `import firefly_scheduling` (which exports
`register`) does not load the resident scheduler or the tick host.
"""
