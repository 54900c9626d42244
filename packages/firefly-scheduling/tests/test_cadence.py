"""Cadence: the bucket table, rounding up, descriptions and epoch-aligned fires."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firefly_scheduling import Cadence
from firefly_scheduling.schedule.cadence import BUCKETS

# Every row of the cadence table: bucket -> description.
TABLE = [
    (1, "every second"),
    (2, "every 2 seconds"),
    (5, "every 5 seconds"),
    (10, "every 10 seconds"),
    (15, "every 15 seconds"),
    (20, "every 20 seconds"),
    (30, "every 30 seconds"),
    (60, "every minute"),
    (300, "every 5 minutes"),
    (600, "every 10 minutes"),
    (900, "every 15 minutes"),
    (1800, "every 30 minutes"),
    (3600, "hourly"),
    (86400, "daily"),
    (604800, "weekly"),
]


def test_table_covers_every_bucket() -> None:
    assert tuple(bucket for bucket, _ in TABLE) == BUCKETS


@pytest.mark.parametrize(("bucket", "description"), TABLE)
def test_every_bucket_maps_to_itself_and_describes_itself(bucket: int, description: str) -> None:
    cadence = Cadence.of_seconds(bucket)
    assert cadence.seconds == bucket
    assert cadence.describe() == description
    assert str(cadence) == description


@pytest.mark.parametrize(
    ("rate", "bucket"),
    [
        (0.001, 1),
        (0.5, 1),
        (1.0001, 2),
        (3, 5),
        (7, 10),
        (11, 15),
        (16, 20),
        (25, 30),
        (31, 60),
        (45, 60),
        (61, 300),
        (240, 300),
        (420, 600),
        (601, 900),
        (1000, 1800),
        (1801, 3600),
        (3601, 86400),
        (86401, 604800),
        (604801, 604800),
        (10**9, 604800),
    ],
)
def test_rates_round_up_to_the_next_bucket(rate: float, bucket: int) -> None:
    assert Cadence.of_seconds(rate).seconds == bucket


def test_spec_examples() -> None:
    assert Cadence.of_seconds(7).describe() == "every 10 seconds"
    assert Cadence.of_seconds(45).describe() == "every minute"
    assert Cadence.of_seconds(7 * 60).describe() == "every 10 minutes"


@pytest.mark.parametrize("rate", [0, -1, float("nan"), float("inf"), True])
def test_invalid_rates_are_refused(rate: float) -> None:
    with pytest.raises(ValueError):
        Cadence.of_seconds(rate)


def test_a_cadence_must_be_a_bucket() -> None:
    with pytest.raises(ValueError, match="not a cadence bucket"):
        Cadence(7)


rates = st.floats(min_value=1e-3, max_value=604800, allow_nan=False, allow_infinity=False)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(rate=rates)
def test_bucket_is_never_shorter_than_the_rate(rate: float) -> None:
    assert Cadence.of_seconds(rate).seconds >= rate


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(rate=st.floats(min_value=604800, max_value=1e12))
def test_beyond_a_week_is_weekly(rate: float) -> None:
    assert Cadence.of_seconds(rate).seconds == 604800


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(first=rates, second=rates)
def test_monotonic_in_the_rate(first: float, second: float) -> None:
    low, high = sorted((first, second))
    assert Cadence.of_seconds(low).seconds <= Cadence.of_seconds(high).seconds


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(rate=rates)
def test_the_bucket_is_the_smallest_that_fits(rate: float) -> None:
    chosen = Cadence.of_seconds(rate).seconds
    assert all(bucket < rate for bucket in BUCKETS if bucket < chosen)


MINUTE = datetime(2024, 5, 6, 12, 35, tzinfo=UTC)  # a Monday


def test_sub_minute_cadences_fire_several_times_in_every_minute() -> None:
    fires = Cadence(15).fires_within_minute(MINUTE)
    assert fires == tuple(MINUTE + timedelta(seconds=s) for s in (0, 15, 30, 45))
    assert len(Cadence(1).fires_within_minute(MINUTE)) == 60
    assert len(Cadence(20).fires_within_minute(MINUTE)) == 3


def test_minute_and_longer_cadences_fire_on_aligned_minutes_only() -> None:
    assert Cadence(60).fires_within_minute(MINUTE) == (MINUTE,)
    assert Cadence(300).is_due(MINUTE)  # :35
    assert not Cadence(600).is_due(MINUTE)
    assert Cadence(600).is_due(MINUTE.replace(minute=40))
    assert not Cadence(3600).is_due(MINUTE)
    assert Cadence(3600).is_due(MINUTE.replace(minute=0))
    assert Cadence(86400).is_due(MINUTE.replace(hour=0, minute=0))
    assert not Cadence(86400).is_due(MINUTE.replace(minute=0))


def test_weekly_fires_on_thursdays_at_midnight_utc() -> None:
    thursday = datetime(2024, 5, 9, tzinfo=UTC)
    assert Cadence(604800).is_due(thursday)
    assert not Cadence(604800).is_due(thursday - timedelta(days=1))


def test_due_minutes_are_read_in_utc_whatever_the_zone() -> None:
    paris = MINUTE.replace(minute=0).astimezone(ZoneInfo("Europe/Paris"))
    assert Cadence(3600).is_due(paris)


@pytest.mark.parametrize(
    "bad",
    [
        datetime(2024, 5, 6, 12, 35),
        MINUTE + timedelta(seconds=1),
        MINUTE + timedelta(microseconds=1),
    ],
)
def test_minute_start_must_be_an_aware_whole_minute(bad: datetime) -> None:
    with pytest.raises(ValueError):
        Cadence(60).is_due(bad)


def test_fire_at_or_before_and_next_after() -> None:
    instant = datetime(2024, 5, 6, 12, 37, 12, 500000, tzinfo=UTC)
    assert Cadence(300).fire_at_or_before(instant) == datetime(2024, 5, 6, 12, 35, tzinfo=UTC)
    assert Cadence(300).next_after(instant) == datetime(2024, 5, 6, 12, 40, tzinfo=UTC)
    on_fire = datetime(2024, 5, 6, 12, 40, tzinfo=UTC)
    assert Cadence(300).fire_at_or_before(on_fire) == on_fire
    assert Cadence(300).next_after(on_fire) == on_fire + timedelta(minutes=5)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(
    instant=st.datetimes(
        min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ),
    bucket=st.sampled_from(BUCKETS),
)
def test_fires_are_aligned_and_bracket_the_instant(instant: datetime, bucket: int) -> None:
    cadence = Cadence(bucket)
    before = cadence.fire_at_or_before(instant)
    after = cadence.next_after(instant)
    assert before <= instant < after
    assert after - before == timedelta(seconds=bucket)
    assert (before - datetime(1970, 1, 1, tzinfo=UTC)) % timedelta(seconds=bucket) == timedelta(0)
