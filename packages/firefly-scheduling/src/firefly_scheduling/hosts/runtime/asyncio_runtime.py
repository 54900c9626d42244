"""`AsyncTaskRuntime`: what every fire of the asyncio host needs, on the host's event loop.

The asyncio twin of `TaskRuntime` (everything but the types of the lock and the
runner, and closing, is shared code, `RuntimeBase`): its lock is an
`AsyncDistributedLock` and its fire runner an `AsyncFireRunner`, both used from the
event loop the host runs on (the application's own, under uvicorn).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack

from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.hosts.runtime.task_runtime import RuntimeBase
from firefly_scheduling.locks.port import AsyncDistributedLock

logger = logging.getLogger("firefly_scheduling.hosts")


class AsyncTaskRuntime(RuntimeBase[AsyncDistributedLock, AsyncFireRunner]):
    """The async lock, gate, callables, observers and in-flight bookkeeping of one host."""

    def default_runner(self) -> AsyncFireRunner:
        return AsyncFireRunner(self.lock.get(), clock=self.wall_now, node=self.node)

    async def wait_idle_async(self, timeout: float, *, poll: float = 0.05) -> bool:
        """Wait up to `timeout` seconds, without blocking the loop, for the fires in flight."""
        deadline = asyncio.get_running_loop().time() + max(timeout, 0.0)
        while self.in_flight():
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(poll, remaining))
        return True

    async def aclose(self) -> None:
        """Close the fire runner, the lock and the gate's store if they were built.

        Each is closed even if an earlier one fails; the runner goes first (it may
        still write unrecorded finishes), the gate's store is closed off the loop.
        """
        async with AsyncExitStack() as closing:
            if self.gate.built:
                closing.push_async_callback(asyncio.to_thread, self.gate.get().close)
            if self.lock.built:
                closing.push_async_callback(self.lock.get().aclose)
            if self.fire_runner.built:
                closing.push_async_callback(self.fire_runner.get().aclose)
