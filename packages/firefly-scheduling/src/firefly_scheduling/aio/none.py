"""`AsyncNoneLock`: the default, for a single node or for tasks that may run everywhere.

Written once, for asyncio; the synchronous `NoneLock` in `locks/none.py` is generated
from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.locks.validation import validate_lock_name, validate_ttl


class AsyncNoneLock:
    """Every acquire succeeds and release does nothing.

    It provides no exclusion at all: with several replicas, every replica runs every
    locked task. It still validates names and TTLs, so a configuration that works
    with `AsyncNoneLock` in development does not start failing when a real backend is
    configured in production.
    """

    backend_name = "none"
    capabilities = LockCapabilities(ttl_honoured=False, cross_process=False)

    async def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        validate_lock_name(name)
        validate_ttl(ttl_seconds)
        return True

    async def release(self, name: str) -> None:
        validate_lock_name(name)

    async def aclose(self) -> None:
        """Nothing to give back: it holds nothing and has no connection."""

    def __repr__(self) -> str:
        return "AsyncNoneLock()"
