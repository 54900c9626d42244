# Generated from firefly_scheduling_redis/aio_pool_gate.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`PoolGate`: at most `size` commands of one client in flight, so at most `size` connections.

redis-py's pools open one connection per concurrent caller, and a node shares one
lock among up to 64 worker threads. Its own bounds do not fit every client: the
single-server `BlockingConnectionPool` waits, but its asyncio cluster client has no
blocking pool (a full node pool raises `MaxConnectionsError` at once), and the
synchronous cluster client takes a blocking pool's "No connection available" for a
failed node and rereads the slot map. So the lock bounds its callers itself: each
command (one round trip, or a script reload and its retry) holds a slot of this gate,
and the client's pool, also capped at `size` (per node on a cluster), never needs a
connection more. A caller that waits longer than `wait_seconds` for a slot gets
`PoolExhaustedError`, naming the bound. A process forked while slots were held
starts with all of them free, as redis-py's pools start empty in a child.

Written for asyncio; `pool_gate.py` is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from firefly_scheduling.forks import reset_in_forked_child
from firefly_scheduling.locks.pool_size import PoolExhaustedError


class PoolGate:
    """`size` slots; `slot()` holds one for the length of one command."""

    def __init__(self, size: int, *, wait_seconds: float) -> None:
        self.size = size
        self.wait_seconds = wait_seconds
        self._slots = threading.BoundedSemaphore(size)
        reset_in_forked_child(self, PoolGate._all_free)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Wait up to `wait_seconds` for a free slot, hold it while the block runs."""
        slots = self._slots  # released on the semaphore it was taken from
        acquired = slots.acquire(timeout=self.wait_seconds)
        if not acquired:
            raise PoolExhaustedError(self.size, self.wait_seconds)
        try:
            yield
        finally:
            slots.release()

    def _all_free(self) -> None:
        """In a forked child: the parent's threads that held slots are not here."""
        self._slots = threading.BoundedSemaphore(self.size)


@contextmanager
def gated(gate: PoolGate | None) -> Iterator[None]:
    """Hold a slot of `gate` while the block runs; no gate (the caller's own client), no wait."""
    if gate is None:
        yield
    else:
        with gate.slot():
            yield
