"""The clock seam of the cron-driven host: tests move time instead of sleeping."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Where a host reads the time and waits."""

    def now(self) -> datetime:
        """The current instant, aware, in UTC."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` (never negative)."""
        ...


class SystemClock:
    """The real wall clock and `time.sleep`."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)
