"""APScheduler triggers for firefly tasks, and how each names the fire it is running.

APScheduler 3 asks a trigger only `get_next_fire_time(previous, now)`. These triggers
answer it from firefly's own schedule objects, and add `fire_at_or_before(now)`: the
scheduled instant a job that woke up at `now` belongs to (with coalescing, the
latest one). That instant is the fire's identity (see `fire_instants`).

`CronTrigger.from_crontab` is deliberately not used: APScheduler 3 reads day-of-week
0 as Monday, so `0 3 * * 0` would fire on Mondays. `CronScheduleTrigger` wraps
`CronSchedule`, which has crontab semantics and firefly's DST rules.

`JitteredTrigger` wraps either for a task with `jitter=`: APScheduler wakes the job
at each instant plus its offset, and `fire_at_or_before(now)` still answers the
instant, the latest whose offset has passed at `now`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from apscheduler.triggers.base import BaseTrigger

from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.durations import (
    MAX_DURATION_SECONDS,
    MIN_DURATION_SECONDS,
    format_duration,
)
from firefly_scheduling.schedule.fire_instants import (
    cron_fire_at_or_before,
    rate_fire_after,
    rate_fire_at_or_before,
    rate_step,
)
from firefly_scheduling.schedule.jitter import jitter_offset

_MICROSECOND = timedelta(microseconds=1)


class FireTrigger(BaseTrigger):  # type: ignore[misc]  # APScheduler 3 ships no type hints
    """A trigger that can also name the fire a wake-up at `now` belongs to."""

    __slots__ = ()

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        raise NotImplementedError

    def fire_at_or_before(self, now: datetime) -> datetime:
        raise NotImplementedError


class EpochAlignedRateTrigger(FireTrigger):
    """Fires at every `k * rate` since the Unix epoch: exact intervals, sub-second too.

    Start to start, like `fixed_rate`; a run longer than the rate makes the job skip
    the fires that come while it runs (the job is added with `max_instances=1`).
    """

    __slots__ = ("step",)

    def __init__(self, rate_seconds: float) -> None:
        self.step = rate_step(rate_seconds)

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        if previous_fire_time is None:
            # The first aligned instant at or after now.
            return rate_fire_after(self.step, now - _MICROSECOND)
        return rate_fire_after(self.step, previous_fire_time)

    def fire_at_or_before(self, now: datetime) -> datetime:
        return rate_fire_at_or_before(self.step, now)

    def __str__(self) -> str:
        seconds = self.step.total_seconds()
        # Validated rates always format; a hand-built trigger must still print.
        if MIN_DURATION_SECONDS <= seconds <= MAX_DURATION_SECONDS:
            return f"every {format_duration(seconds)} (epoch-aligned)"
        return f"every {seconds!r} s (epoch-aligned)"


class CronScheduleTrigger(FireTrigger):
    """Fires when a `CronSchedule` does (crontab semantics, in the task's zone)."""

    __slots__ = ("schedule",)

    def __init__(self, schedule: CronSchedule) -> None:
        self.schedule = schedule

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        if previous_fire_time is None:
            return self.schedule.next_after(now - _MICROSECOND)
        return self.schedule.next_after(previous_fire_time)

    def fire_at_or_before(self, now: datetime) -> datetime:
        return cron_fire_at_or_before(self.schedule, now)

    def __str__(self) -> str:
        return f"cron[{self.schedule.describe()}]"


class JitteredTrigger(FireTrigger):
    """`inner`'s fires, each woken at its instant plus its jitter offset (`schedule.jitter`).

    Boot validation keeps the jitter shorter than the time between two instants, so
    the wake-ups keep the instants' order: the fire due at `now` is the latest
    instant whose wake-up is at or before `now`, the instant before it at worst.
    """

    __slots__ = ("inner", "jitter", "target")

    def __init__(self, inner: FireTrigger, target: str, jitter: float) -> None:
        self.inner = inner
        self.target = target
        self.jitter = jitter

    def wake_up(self, instant: datetime) -> datetime:
        """When the fire of `instant` starts: the instant plus its offset."""
        return instant + jitter_offset(self.target, instant, self.jitter)

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        # APScheduler hands back the wake-up it was given; the first call, `now`.
        after = now - _MICROSECOND if previous_fire_time is None else previous_fire_time
        instant = self.inner.fire_at_or_before(after)
        if self.wake_up(instant) > after:
            return self.wake_up(instant)
        following = self.inner.get_next_fire_time(instant, now)
        return None if following is None else self.wake_up(following)

    def fire_at_or_before(self, now: datetime) -> datetime:
        instant = self.inner.fire_at_or_before(now)
        if self.wake_up(instant) <= now:
            return instant
        return self.inner.fire_at_or_before(instant - _MICROSECOND)

    def __str__(self) -> str:
        return f"{self.inner} + jitter up to {format_duration(self.jitter)}"
