"""The clock seam of the cron-driven host: tests move time instead of sleeping."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

# The longest a `SystemClock.sleep` goes without looking at `interrupt()`.
_INTERRUPT_POLL_SECONDS = 0.1


class Clock(Protocol):
    """Where a host reads the time and waits."""

    def now(self) -> datetime:
        """The current instant, aware, in UTC."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` (never negative), or less once `interrupt()` was called."""
        ...

    def interrupt(self) -> None:
        """End the current sleep soon, and every later one at once (the host stops).

        Called from a signal handler: it must not take a lock.
        """
        ...


class SystemClock:
    """The real wall clock and `time.sleep`, interruptible for a graceful stop."""

    def __init__(self) -> None:
        self._interrupted = False

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._interrupted:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(remaining, _INTERRUPT_POLL_SECONDS))

    def interrupt(self) -> None:
        self._interrupted = True
