# Generated from waiting_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""How a waiting acquisition waits: in-process turns, and pauses between attempts.

A lock taken with `wait=` (see `locks.base_waiting_async`) tries, and while it loses,
waits for a chance to try again. Two things here make that cheap and fair:

* `Waiters`: the waiters of one lock instance for one name are served in the
  order they arrived. Only the first of them talks to the server; the others wait
  here, without a round trip, until it has won or given up. A local release of the
  name (by this instance) wakes the first waiter at once.
* `Backoff`: where the server has no wait and no notification of its own, a loser
  sleeps between attempts for a capped, exponentially growing time with jitter
  (half the step fixed, half random), so many waiters neither hammer the server nor
  retry in step.

Written once, for asyncio; `locks/waiting.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

#: The first pause after a lost attempt, and the longest, in seconds.
FIRST_PAUSE_SECONDS = 0.005
LONGEST_PAUSE_SECONDS = 0.25
#: Longest a waiter woken by a release notification (a Redis message, an etcd watch)
#: sleeps before trying again unwoken: a notification missed (an older node's release
#: that sends none, a subscription lost and not yet noticed) costs at most this.
NOTIFIED_RECHECK_SECONDS = 2.0


class Backoff:
    """Pauses of `first`, 2x, 4x... up to `longest` seconds, each with equal jitter."""

    def __init__(
        self, *, first: float = FIRST_PAUSE_SECONDS, longest: float = LONGEST_PAUSE_SECONDS
    ) -> None:
        self._step = first
        self._longest = longest

    def next(self) -> float:
        """The next pause: half the step, plus up to half of it at random."""
        step = self._step
        self._step = min(step * 2, self._longest)
        return step / 2 + random.uniform(0, step / 2)  # noqa: S311 - jitter, not a secret


class _Waiter:
    """One waiting acquisition: woken when it becomes first, or when its name is freed here."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()


class Waiters:
    """The waiters of one lock instance, per name, first come first served."""

    def __init__(self) -> None:
        # Plain dictionary operations under a thread lock: never held across a wait.
        self._mutex = threading.Lock()
        self._queues: dict[str, deque[_Waiter]] = {}

    def waiting(self, name: str) -> int:
        """How many acquisitions wait for `name` here (tests, diagnostics)."""
        with self._mutex:
            return len(self._queues.get(name, ()))

    @contextmanager
    def turn(self, name: str, deadline: float) -> Iterator[_Waiter | None]:
        """Wait until every earlier waiter for `name` is done; yield the waiter, or None
        when `deadline` (monotonic) passed first. The turn ends with the block."""
        waiter = _Waiter()
        with self._mutex:
            queue = self._queues.setdefault(name, deque())
            queue.append(waiter)
            first = queue[0] is waiter
        try:
            while not first:
                if not sleep_until_woken(waiter, deadline):
                    break
                with self._mutex:
                    first = self._queues[name][0] is waiter
            yield waiter if first else None
        finally:
            with self._mutex:
                queue = self._queues[name]
                queue.remove(waiter)
                if queue:
                    queue[0].event.set()
                else:
                    del self._queues[name]

    def freed(self, name: str) -> None:
        """This instance let `name` go: wake the first waiter for it, if any."""
        with self._mutex:
            queue = self._queues.get(name)
            if queue:
                queue[0].event.set()


def wait_at_most(event: threading.Event, seconds: float) -> bool:
    """Wait until `event` is set (True) or `seconds` pass (False)."""
    return event.wait(seconds)


def sleep_until_woken(waiter: _Waiter, deadline: float) -> bool:
    """Sleep until `waiter` is woken (True) or `deadline` passes (False); clear the wake."""
    seconds = deadline - time.monotonic()
    if seconds <= 0:
        return False
    woken = waiter.event.wait(None if seconds == float("inf") else seconds)
    waiter.event.clear()
    return woken
