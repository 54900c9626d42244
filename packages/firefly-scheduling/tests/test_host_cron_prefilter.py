"""The tick host's cron prefilter never disagrees with `CronSchedule.matches`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.cron_prefilter import MinutePrefilter

EXPRESSIONS = [
    "0 3 * * 0",
    "30 2 * * *",
    "* 2 * * *",
    "15 1-3 * * *",
    "*/15 1-3 1,15 jan-mar mon-fri",
    "0 0 */2 * 1",
    "0 0 29 2 *",
    "@weekly",
    "@hourly",
    "* * * * *",
]
ZONES = [None, "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
# A day of 2026 on which each zone changes its UTC offset (none for UTC or Kolkata).
TRANSITION_DAYS = {
    "Europe/Paris": [datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 10, 25, tzinfo=UTC)],
    "America/New_York": [datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)],
    "Australia/Lord_Howe": [datetime(2026, 4, 4, tzinfo=UTC), datetime(2026, 10, 3, tzinfo=UTC)],
}


def _transition(zone: str, day: datetime) -> datetime:
    """The instant during `day` (UTC, give or take a day) when `zone` changes offset."""
    tz = ZoneInfo(zone)
    low, high = day - timedelta(days=1), day + timedelta(days=2)
    assert low.astimezone(tz).utcoffset() != high.astimezone(tz).utcoffset()
    while high - low > timedelta(minutes=1):
        middle = low + (high - low) / 2
        if middle.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
            low = middle
        else:
            high = middle
    return high.replace(second=0, microsecond=0)


def _minutes_around(transition: datetime) -> list[datetime]:
    """Every minute near the transition and the prefilter's 3 h window edge; sparser between."""
    dense = [*range(-15, 15), *range(170, 190)]
    sparse = range(-60, 300, 5)
    return [transition + timedelta(minutes=m) for m in sorted({*dense, *sparse})]


@pytest.mark.parametrize("zone", sorted(TRANSITION_DAYS))
@pytest.mark.parametrize("expression", ["30 2 * * *", "* 2 * * *", "15 1-3 * * *", "0 * * * *"])
def test_the_minutes_around_each_transition(expression: str, zone: str) -> None:
    schedule = CronSchedule.parse(expression, zone, source="test")
    prefilter = MinutePrefilter(schedule)
    for day in TRANSITION_DAYS[zone]:
        for minute in _minutes_around(_transition(zone, day)):
            assert prefilter.fires_at(minute) == schedule.matches(minute), minute


@settings(max_examples=300, deadline=None)
@given(
    expression=st.sampled_from(EXPRESSIONS),
    zone=st.sampled_from(ZONES),
    minutes=st.integers(min_value=0, max_value=3 * 366 * 24 * 60),
)
def test_any_minute(expression: str, zone: str | None, minutes: int) -> None:
    schedule = CronSchedule.parse(expression, zone, source="test")
    minute = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    assert MinutePrefilter(schedule).fires_at(minute) == schedule.matches(minute)
