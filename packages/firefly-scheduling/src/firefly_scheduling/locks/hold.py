# Generated from hold_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`hold`: the lock as a context manager, for code that has nothing to do with scheduling.

Written once, for asyncio, in `locks/hold_async.py`; the synchronous `hold` in `locks/hold.py`
is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from firefly_scheduling.locks.port import DistributedLock
from firefly_scheduling.locks.port_holdings import holding_lock


@contextmanager
def hold(lock: DistributedLock, name: str, ttl_seconds: float) -> Iterator[bool]:
    """Try `name` once; yield whether it was won; release that holding on exit.

    It never waits: a caller that gets False simply does not do the guarded work.
    The release acts on the holding this call took, never on the name: if the lease
    lapsed meanwhile and another task of the process took the name again, that newer
    holding stays held. Works with any `DistributedLock`, including third-party
    ones::

        with hold(lock, "reindex", 600) as acquired:
            if acquired:
                reindex()
    """
    holdings = holding_lock(lock)
    holding = holdings.acquire(name, ttl_seconds)
    try:
        yield holding is not None
    finally:
        if holding is not None:
            holdings.release_holding(holding)
