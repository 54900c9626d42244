"""`NoneLock`: the default, for a single node or for tasks that may run everywhere.

`AsyncNoneLock` is the same lock for asyncio code.
"""

from __future__ import annotations

from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.locks.validation import validate_lock_name, validate_ttl


class NoneLock:
    """Every acquire succeeds and release does nothing.

    It provides no exclusion at all: with several replicas, every replica runs every
    locked task. It still validates names and TTLs, so a configuration that works
    with `NoneLock` in development does not start failing when a real backend is
    configured in production.
    """

    backend_name = "none"
    capabilities = LockCapabilities(ttl_honoured=False, cross_process=False)

    def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        validate_lock_name(name)
        validate_ttl(ttl_seconds)
        return True

    def release(self, name: str) -> None:
        validate_lock_name(name)

    def __repr__(self) -> str:
        return "NoneLock()"


class AsyncNoneLock:
    """Every acquire succeeds and release does nothing: no exclusion at all.

    It wraps a `NoneLock`, which does no I/O, so awaiting it never blocks the loop;
    names and TTLs are validated exactly as the synchronous lock validates them.
    """

    backend_name = NoneLock.backend_name
    capabilities = NoneLock.capabilities

    def __init__(self) -> None:
        self._rules = NoneLock()

    async def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        return self._rules.try_acquire(name, ttl_seconds)

    async def release(self, name: str) -> None:
        self._rules.release(name)

    async def aclose(self) -> None:
        """Nothing to give back: it holds nothing and has no connection."""

    def __repr__(self) -> str:
        return "AsyncNoneLock()"
