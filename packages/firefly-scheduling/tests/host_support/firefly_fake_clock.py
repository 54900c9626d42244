"""A clock for host tests whose sleep moves time instead of waiting."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

REAL_PAUSE = 0.05


class FakeClock:
    """A clock whose sleep moves time instead of waiting.

    It still pauses for a few real milliseconds, so a quick body started for one slot
    has ended before the next slot comes, as it would have in real time.
    """

    def __init__(self, now: datetime) -> None:
        self.current = now
        self.slept = 0.0
        self.interrupted = False

    def now(self) -> datetime:
        return self.current

    def sleep(self, seconds: float) -> None:
        if seconds > 0 and not self.interrupted:
            self.slept += seconds
            self.current += timedelta(seconds=seconds)
            time.sleep(REAL_PAUSE)

    def interrupt(self) -> None:
        self.interrupted = True
