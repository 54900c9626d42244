"""`AsyncPoolGate`: at most `size` operations of one lock in flight, so `size` connections.

A node shares one lock among up to 64 worker threads, and a driver's pool that grows
with its callers opens a connection per busy thread; the drivers' own bounds do not
all wait, nor fail in a way the lock can tell from a dead server (see the redis and
etcd adapters). So a lock bounds its callers itself: each operation holds a slot of
this gate, and the driver, capped at `size` too, never needs a connection more. A
caller that waits longer than `wait_seconds` for a slot gets `PoolExhaustedError`,
naming the bound. A process forked while slots were held starts with all of them
free, as redis-py's pools start empty in a child.

Written for asyncio; `pool_gate.py` is generated from it by `tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncPoolGate PoolGate
# async-to-sync: rename asyncio.Semaphore fair_semaphore.FairSemaphore

from __future__ import annotations

import asyncio  # sync: from firefly_scheduling.concurrency import fair_semaphore
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.concurrency.forks import reset_in_forked_child
from firefly_scheduling.concurrency.pool_size import PoolExhaustedError


class AsyncPoolGate:
    """`size` slots; `slot()` holds one for the length of one command."""

    def __init__(self, size: int, *, wait_seconds: float) -> None:
        self.size = size
        self.wait_seconds = wait_seconds
        self._slots = asyncio.Semaphore(size)
        reset_in_forked_child(self, AsyncPoolGate._all_free)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait up to `wait_seconds` for a free slot, hold it while the block runs."""
        slots = self._slots  # released on the semaphore it was taken from
        if ASYNC:
            try:
                async with asyncio.timeout(self.wait_seconds):
                    acquired: bool = await slots.acquire()
            except TimeoutError:
                acquired = False
        else:
            acquired = slots.acquire(timeout=self.wait_seconds)
        if not acquired:
            raise PoolExhaustedError(self.size, self.wait_seconds)
        try:
            yield
        finally:
            slots.release()

    def _all_free(self) -> None:
        """In a forked child: the parent's threads that held slots are not here."""
        self._slots = asyncio.Semaphore(self.size)


@asynccontextmanager
async def gated(gate: AsyncPoolGate | None) -> AsyncIterator[None]:
    """Hold a slot of `gate` while the block runs; no gate (the caller's own client), no wait."""
    if gate is None:
        yield
    else:
        async with gate.slot():
            yield
