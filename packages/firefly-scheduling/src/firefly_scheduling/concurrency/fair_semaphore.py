"""`FairSemaphore`: a counting semaphore whose waiters are served first come, first served.

`threading.Semaphore` lets a thread that releases a slot take it straight back on its
next call, ahead of threads that have waited for long: with 64 threads on 4 slots,
some waited more than 3 s while the others cycled. A lock's pool gate (see
`pool_gate_async`) fails a caller that waits too long, so its waiters must be served in
order, as `asyncio.Semaphore` serves coroutines: a release hands the slot to the
oldest waiter directly.
"""

from __future__ import annotations

import threading
from collections import deque


class FairSemaphore:
    """`value` slots, handed to waiting threads in the order they asked."""

    def __init__(self, value: int) -> None:
        self._mutex = threading.Lock()
        self._free = value
        #: One held lock per waiting thread, oldest first; a release unlocks one.
        self._waiters: deque[threading.Lock] = deque()

    def acquire(self, timeout: float | None = None) -> bool:
        """Take a slot, waiting up to `timeout` seconds (None: for ever); False if none came."""
        with self._mutex:
            if self._free and not self._waiters:
                self._free -= 1
                return True
            waiter = threading.Lock()
            waiter.acquire()
            self._waiters.append(waiter)
        if waiter.acquire(timeout=-1 if timeout is None else timeout):
            return True
        with self._mutex:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                return False
        return True  # a release handed it the slot just as the wait ended

    def release(self) -> None:
        """Give the slot to the oldest waiter, or back to the pool when none waits."""
        with self._mutex:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._free += 1
