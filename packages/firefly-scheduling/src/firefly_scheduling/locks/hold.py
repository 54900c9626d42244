"""`hold`: the lock as a context manager, for code that has nothing to do with scheduling."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from firefly_scheduling.locks.port import DistributedLock


@contextmanager
def hold(lock: DistributedLock, name: str, ttl_seconds: float) -> Iterator[bool]:
    """Try `name` once; yield whether it was won; release it on exit if it was.

    It never waits: a caller that gets False simply does not do the guarded work.
    Works with any `DistributedLock`, including third-party implementations::

        with hold(lock, "reindex", 600) as acquired:
            if acquired:
                reindex()
    """
    acquired = lock.try_acquire(name, ttl_seconds)
    try:
        yield acquired
    finally:
        if acquired:
            lock.release(name)
