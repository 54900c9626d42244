"""`AsyncNoneLock`: `NoneLock` for asyncio code, what `resolve_async_lock` gives for `none`."""

from __future__ import annotations

from firefly_scheduling.locks.none import NoneLock


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
