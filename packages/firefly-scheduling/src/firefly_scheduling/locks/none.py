"""`NoneLock`: the default, for a single node or for tasks that may run everywhere."""

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
