"""`Cadence`: a rate rounded up to a frequency the cron-driven host can keep.

`firefly-scheduling tick` wakes once a minute and cannot run arbitrary intervals
(every 7 s, every 45 s), so a `fixed_rate`/`fixed_delay` task runs there at the
first bucket at least as long as its rate: 1, 2, 5, 10, 15, 20 or 30 s, every
minute, every 5, 10, 15 or 30 minutes, hourly, daily, weekly, and weekly beyond
that. Rounding up means a task never runs more often than its author asked.

Fires are aligned to the Unix epoch in UTC, so every node names the same instants:
a 5-minute cadence fires at :00, :05, :10... of every hour, a daily one at 00:00
UTC, and a weekly one on Thursdays at 00:00 UTC (1970-01-01 was a Thursday).
The resident host runs exact intervals instead; `describe()` is what `tick` does.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from firefly_scheduling.schedule.instants import as_utc

#: The cadence buckets, in seconds, in increasing order.
BUCKETS: tuple[int, ...] = (
    1, 2, 5, 10, 15, 20, 30,          # seconds
    60, 300, 600, 900, 1800,          # minutes
    3600, 86400, 604800,              # hourly, daily, weekly
)  # fmt: skip

_MINUTE = 60
_HOUR = 3600
_DAY = 86400
_WEEK = 604800
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Cadence:
    """One of `BUCKETS`; build it with `Cadence.of_seconds(rate)`."""

    seconds: int

    def __post_init__(self) -> None:
        if self.seconds not in BUCKETS:
            raise ValueError(f"{self.seconds!r} is not a cadence bucket; use Cadence.of_seconds()")

    @classmethod
    def of_seconds(cls, seconds: float) -> Cadence:
        """The first bucket of at least `seconds` (weekly beyond a week)."""
        if isinstance(seconds, bool) or not math.isfinite(seconds) or seconds <= 0:
            raise ValueError(f"a cadence needs a finite rate > 0 seconds, got {seconds!r}")
        index = bisect_left(BUCKETS, seconds)
        return cls(BUCKETS[min(index, len(BUCKETS) - 1)])

    def describe(self) -> str:
        """`every second`, `every N seconds`, `every minute`, `every N minutes`, `hourly`..."""
        if self.seconds == 1:
            return "every second"
        if self.seconds < _MINUTE:
            return f"every {self.seconds} seconds"
        if self.seconds == _MINUTE:
            return "every minute"
        if self.seconds < _HOUR:
            return f"every {self.seconds // _MINUTE} minutes"
        return {_HOUR: "hourly", _DAY: "daily", _WEEK: "weekly"}[self.seconds]

    def fires_within_minute(self, minute_start: datetime) -> tuple[datetime, ...]:
        """The fire instants (aware UTC) in `[minute_start, minute_start + 1 minute)`.

        A sub-minute cadence fires several times (a 15 s one at :00, :15, :30, :45);
        a longer one fires at the minute's start when it is aligned, otherwise never.
        """
        start = _whole_minute(minute_start)
        offset = _epoch_seconds(start)
        if self.seconds < _MINUTE:
            return tuple(
                start + timedelta(seconds=second) for second in range(0, _MINUTE, self.seconds)
            )
        return (start,) if offset % self.seconds == 0 else ()

    def is_due(self, minute_start: datetime) -> bool:
        """Whether the cadence fires at least once in the minute starting at `minute_start`."""
        return bool(self.fires_within_minute(minute_start))

    def fire_at_or_before(self, instant: datetime) -> datetime:
        """The latest aligned fire instant not after `instant` (aware UTC).

        It identifies "this fire" identically on every node, whatever the exact wall
        clock at which a node woke up within the interval.
        """
        elapsed = _epoch_seconds(as_utc(instant))
        return _EPOCH + timedelta(seconds=elapsed - elapsed % self.seconds)

    def next_after(self, instant: datetime) -> datetime:
        """The first aligned fire instant strictly after `instant` (aware UTC)."""
        return self.fire_at_or_before(instant) + timedelta(seconds=self.seconds)

    def __str__(self) -> str:
        return self.describe()


def _whole_minute(instant: datetime) -> datetime:
    utc = as_utc(instant)
    if utc.second or utc.microsecond:
        raise ValueError(f"expected the start of a minute, got {utc.isoformat()}")
    return utc


def _epoch_seconds(instant: datetime) -> int:
    # Integer floor division of timedeltas: exact, unlike float seconds near 1.7e9.
    return (instant - _EPOCH) // timedelta(seconds=1)
