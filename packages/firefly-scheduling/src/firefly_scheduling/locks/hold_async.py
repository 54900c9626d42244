"""`ahold`: the lock as a context manager, for code that has nothing to do with scheduling.

Written once, for asyncio, in `locks/hold_async.py`; the synchronous `hold` in `locks/hold.py`
is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from firefly_scheduling.locks.port import AsyncDistributedLock
from firefly_scheduling.locks.port_holdings_async import async_holding_lock


@asynccontextmanager
async def ahold(lock: AsyncDistributedLock, name: str, ttl_seconds: float) -> AsyncIterator[bool]:
    """Try `name` once; yield whether it was won; release that holding on exit.

    It never waits: a caller that gets False simply does not do the guarded work.
    The release acts on the holding this call took, never on the name: if the lease
    lapsed meanwhile and another task of the process took the name again, that newer
    holding stays held. Works with any `AsyncDistributedLock`, including third-party
    ones::

        async with ahold(lock, "reindex", 600) as acquired:
            if acquired:
                await reindex()
    """
    holdings = async_holding_lock(lock)
    holding = await holdings.acquire(name, ttl_seconds)
    try:
        yield holding is not None
    finally:
        if holding is not None:
            await holdings.release_holding(holding)
