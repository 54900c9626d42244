"""A cheap "can this cron fire in this minute?" test, so `tick` can plan thousands of crons.

`CronSchedule.matches` is exact (DST rules included) but costs a croniter search,
about half a millisecond; a tick checking a thousand distinct expressions every
minute would spend half a second deciding that nothing is due. `MinutePrefilter`
answers from the expanded fields first and leaves every decision that could be
"yes" to `CronSchedule.matches`, so the cron semantics stay in one place:

* it compares the minute's wall-clock reading in the task's zone with the fields,
  reading day-of-month and day-of-week as "either matches" (a superset of both
  crontab rules), and says "maybe" or "no";
* within three hours after a UTC-offset change (a DST transition), where a fire can
  land on a wall-clock time that does not match the fields (the end of a
  spring-forward gap), it always says "maybe".

Away from transitions, wall-clock times map one to one onto instants and a cron
fires exactly at matching wall-clock times, so "no" is always right.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from firefly_scheduling.schedule.cron import CronSchedule, croniter_for
from firefly_scheduling.schedule.instants import as_utc

# Longer than any wall-clock shift a DST transition makes (2 h at most, historically).
_TRANSITION_WINDOW = timedelta(hours=3)
_REFERENCE = datetime(2000, 1, 1)
_SUNDAY_AS_SEVEN = 7


def _field(values: list[int | str]) -> frozenset[int] | None:
    """The allowed values of one expanded field; None for `*` (anything)."""
    if values == ["*"]:
        return None
    return frozenset(0 if value == _SUNDAY_AS_SEVEN else int(value) for value in values)


@dataclass(frozen=True)
class WallClock:
    """A UTC minute as read in one zone: computed once per zone when planning a minute."""

    minute: datetime
    local: datetime
    near_transition: bool

    @classmethod
    def of(cls, minute: datetime, zone: ZoneInfo) -> WallClock:
        utc = as_utc(minute)
        local = utc.astimezone(zone)
        before = (utc - _TRANSITION_WINDOW).astimezone(zone)
        return cls(utc, local, local.utcoffset() != before.utcoffset())


class MinutePrefilter:
    """Rules out most minutes for one `CronSchedule` without a croniter search."""

    def __init__(self, schedule: CronSchedule) -> None:
        self.schedule = schedule
        minutes, hours, days, months, weekdays = croniter_for(schedule.fields, _REFERENCE).expanded
        self._minutes = _field(minutes)
        self._hours = _field(hours)
        self._days = _field(days)
        self._months = _field(months)
        self._weekdays = _field(weekdays)

    def fires_at(self, minute: datetime, wall_clock: WallClock | None = None) -> bool:
        """Exactly `schedule.matches(minute)`, usually without computing it.

        `wall_clock` is `WallClock.of(minute, schedule.zone)`, passed in when many
        schedules of one zone are checked for the same minute.
        """
        wall = wall_clock or WallClock.of(minute, self.schedule.zone)
        if not wall.near_transition and not self._may_fire_at_wall_clock(wall.local):
            return False
        return self.schedule.matches(wall.minute)

    def _may_fire_at_wall_clock(self, local: datetime) -> bool:
        if self._minutes is not None and local.minute not in self._minutes:
            return False
        if self._hours is not None and local.hour not in self._hours:
            return False
        if self._months is not None and local.month not in self._months:
            return False
        if self._days is None or self._weekdays is None:
            day_ok = self._days is None or local.day in self._days
            weekday_ok = self._weekdays is None or local.isoweekday() % 7 in self._weekdays
            return day_ok and weekday_ok
        return local.day in self._days or local.isoweekday() % 7 in self._weekdays
