"""`AsyncInMemoryLock`: real mutual exclusion between the tasks (and threads) of one process.

Written once, for asyncio, in `locks/memory_async.py`; the synchronous `InMemoryLock` in
`locks/memory.py` is generated from it by `tools/async_to_sync.py`. Both use the
process-wide `MemoryTable`, so they exclude each other.
"""

from __future__ import annotations

from firefly_scheduling.locks.base_async import AsyncBaseLock
from firefly_scheduling.locks.memory_table import PROCESS_TABLE


class AsyncInMemoryLock(AsyncBaseLock):
    """A lease lock kept in this process's memory, on the monotonic clock.

    It excludes the tasks and threads of one process, never other processes or
    hosts: use it for tests and for single-process deployments that want the same
    semantics as the real backends. Every instance shares the process-wide table,
    just as instances of a server backend share their server.
    """

    backend_name = "memory"
    ttl_honoured = True
    session_scoped = False
    cross_process = False
    supports_fencing = True
    renewable = True
    driver_errors = ()

    def __init__(self) -> None:
        super().__init__(target="process memory")

    @staticmethod
    def entries() -> int:
        """How many leases the process table holds (expired ones not yet purged included)."""
        return len(PROCESS_TABLE)

    async def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return PROCESS_TABLE.acquire(name, owner, ttl_seconds)

    async def _release(self, name: str, owner: str) -> bool:
        return PROCESS_TABLE.release(name, owner)

    async def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return PROCESS_TABLE.renew(name, owner, ttl_seconds)

    async def _fence(self, name: str) -> int:
        return PROCESS_TABLE.fence(name)
