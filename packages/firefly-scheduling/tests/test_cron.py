"""CronSchedule: standard crontab semantics, refusals, and the documented DST rules."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from firefly_scheduling import ConfigurationError
from firefly_scheduling.schedule.cron import CronSchedule, resolve_zone

SOURCE = "app.tasks:report"
JAN_1 = datetime(2024, 1, 1, tzinfo=UTC)  # a Monday


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def fires(cron: CronSchedule, start: datetime, end: datetime) -> list[datetime]:
    """Every fire in (start, end], bounded by the interval."""
    found: list[datetime] = []
    current = start
    for _ in range(10_000):
        current = cron.next_after(current)
        if current > end:
            return found
        found.append(current)
    raise AssertionError("more fires than the bound allows")


@pytest.mark.parametrize("expression", ["0 3 * * 0", "0 3 * * 7", "0 3 * * sun", "0 3 * * SUN"])
def test_day_of_week_zero_and_seven_are_sunday(expression: str) -> None:
    cron = CronSchedule.parse(expression, None, source=SOURCE)
    first = cron.next_after(JAN_1)
    assert first == utc(2024, 1, 7, 3)
    assert first.weekday() == 6
    assert cron.next_after(first) == utc(2024, 1, 14, 3)


def test_day_of_week_one_is_monday() -> None:
    assert CronSchedule.parse("0 3 * * 1", None, source=SOURCE).next_after(JAN_1) == utc(
        2024, 1, 1, 3
    )


def test_day_of_month_and_day_of_week_match_when_either_does() -> None:
    cron = CronSchedule.parse("0 0 13 * 5", None, source=SOURCE)  # the 13th, or Fridays
    assert fires(cron, JAN_1, utc(2024, 1, 14)) == [
        utc(2024, 1, 5),
        utc(2024, 1, 12),
        utc(2024, 1, 13),
    ]


@pytest.mark.parametrize(
    ("macro", "first"),
    [
        ("@hourly", utc(2024, 1, 1, 1)),
        ("@daily", utc(2024, 1, 2)),
        ("@midnight", utc(2024, 1, 2)),
        ("@weekly", utc(2024, 1, 7)),
        ("@monthly", utc(2024, 2, 1)),
        ("@yearly", utc(2025, 1, 1)),
        ("@annually", utc(2025, 1, 1)),
        ("@DAILY", utc(2024, 1, 2)),
    ],
)
def test_macros(macro: str, first: datetime) -> None:
    cron = CronSchedule.parse(macro, None, source=SOURCE)
    assert cron.next_after(JAN_1) == first
    assert cron.expression == macro


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("* * * * * *", "has 6 fields"),
        ("0 * * * * * 2024", "has 7 fields"),
        ("* * * *", "has 4 fields"),
        ("", "has 0 fields"),
        ("@reboot", "not supported"),
        ("@every", "not a known macro"),
        ("0 0 L * *", "non-standard day-of-month"),
        ("0 0 1W * *", "non-standard day-of-month"),
        ("0 0 * * 5#2", "non-standard day-of-week"),
        ("0 0 * * 5L", "non-standard day-of-week"),
        ("0 0 ? * *", "non-standard day-of-month"),
        ("R * * * *", "non-standard minute"),
        ("H * * * *", "non-standard minute"),
        ("0 0 * foo *", "non-standard month"),
        ("0 0 * * funday", "non-standard day-of-week"),
        ("60 * * * *", "minute field '60' where 60 is out of range 0-59"),
        ("0 24 * * *", "hour field '24' where 24 is out of range 0-23"),
        ("0 0 * * 8", "day-of-week field '8' where 8 is out of range 0-7"),
        ("0 0 32 * *", "day-of-month field '32' where 32 is out of range 1-31"),
        ("0 0 30 2 *", "never fires"),
    ],
)
def test_refused_expressions_name_the_source_and_the_expression(
    expression: str, fragment: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        CronSchedule.parse(expression, None, source=SOURCE)
    message = str(raised.value)
    assert message.startswith(f"{SOURCE}: cron {expression!r}")
    assert fragment in message


def test_a_non_string_expression_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=SOURCE):
        CronSchedule.parse(5, None, source=SOURCE)  # type: ignore[arg-type]


def test_unknown_zone_is_refused_with_source_and_zone() -> None:
    with pytest.raises(
        ConfigurationError, match=r"app\.tasks:report: unknown time zone 'Mars/Base'"
    ):
        CronSchedule.parse("* * * * *", "Mars/Base", source=SOURCE)


@pytest.mark.parametrize("name", ["Mars/Base", "", "../etc/passwd", "europe/paris "])
def test_resolve_zone_refuses_unknown_names(name: str) -> None:
    with pytest.raises(ConfigurationError, match="unknown time zone"):
        resolve_zone(name, source=SOURCE)


def test_resolve_zone_defaults_to_utc() -> None:
    assert resolve_zone(None, source=SOURCE).key == "UTC"
    assert resolve_zone("Europe/Paris", source=SOURCE) == ZoneInfo("Europe/Paris")


def test_next_after_is_strict_and_returns_aware_utc() -> None:
    cron = CronSchedule.parse("*/5 * * * *", "Europe/Paris", source=SOURCE)
    on_fire = utc(2024, 1, 1, 10, 5)
    following = cron.next_after(on_fire)
    assert following == utc(2024, 1, 1, 10, 10)
    assert following.tzinfo is UTC
    assert cron.next_after(on_fire - timedelta(microseconds=1)) == on_fire
    assert cron.next_after(on_fire.astimezone(ZoneInfo("Asia/Tokyo"))) == following


def test_naive_instants_are_refused() -> None:
    cron = CronSchedule.parse("* * * * *", None, source=SOURCE)
    with pytest.raises(ValueError, match="naive"):
        cron.next_after(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="naive"):
        cron.matches(datetime(2024, 1, 1))


def test_evaluated_in_the_zone() -> None:
    cron = CronSchedule.parse("0 9 * * *", "America/New_York", source=SOURCE)
    assert cron.next_after(JAN_1) == utc(2024, 1, 1, 14)  # EST, UTC-5
    assert cron.next_after(utc(2024, 7, 1)) == utc(2024, 7, 1, 13)  # EDT, UTC-4
    assert cron.zone_name == "America/New_York"
    assert cron.describe() == "0 9 * * * (America/New_York)"
    assert CronSchedule.parse("0 9 * * *", None, source=SOURCE).describe() == "0 9 * * *"


def test_matches_the_utc_minute() -> None:
    cron = CronSchedule.parse("*/15 * * * *", None, source=SOURCE)
    assert cron.matches(utc(2024, 1, 1, 10, 15))
    assert cron.matches(utc(2024, 1, 1, 10, 15) + timedelta(seconds=59))
    assert not cron.matches(utc(2024, 1, 1, 10, 16))


# -- daylight-saving time -------------------------------------------------------------

PARIS_SPRING = (utc(2024, 3, 30, 12), utc(2024, 4, 1, 12))  # 02:00 CET -> 03:00 CEST
PARIS_AUTUMN = (utc(2024, 10, 26, 12), utc(2024, 10, 28, 12))  # 03:00 CEST -> 02:00 CET
NEW_YORK_SPRING = (utc(2024, 3, 9, 12), utc(2024, 3, 11, 12))  # 02:00 EST -> 03:00 EDT
NEW_YORK_AUTUMN = (utc(2024, 11, 2, 12), utc(2024, 11, 4, 12))  # 02:00 EDT -> 01:00 EST


def test_paris_spring_forward_runs_a_skipped_daily_time_once_after_the_gap() -> None:
    cron = CronSchedule.parse("30 2 * * *", "Europe/Paris", source=SOURCE)
    assert fires(cron, *PARIS_SPRING) == [utc(2024, 3, 31, 1), utc(2024, 4, 1, 0, 30)]
    assert utc(2024, 3, 31, 1).astimezone(cron.zone).strftime("%H:%M %Z") == "03:00 CEST"


def test_paris_fall_back_runs_a_repeated_daily_time_once() -> None:
    cron = CronSchedule.parse("30 2 * * *", "Europe/Paris", source=SOURCE)
    assert fires(cron, *PARIS_AUTUMN) == [utc(2024, 10, 27, 0, 30), utc(2024, 10, 28, 1, 30)]
    # Asked from inside the second pass of the repeated hour, it does not fire again.
    second_pass = utc(2024, 10, 27, 1, 15)  # 02:15 CET
    assert cron.next_after(second_pass) == utc(2024, 10, 28, 1, 30)


def test_new_york_spring_forward() -> None:
    daily = CronSchedule.parse("30 2 * * *", "America/New_York", source=SOURCE)
    assert fires(daily, *NEW_YORK_SPRING) == [utc(2024, 3, 10, 7), utc(2024, 3, 11, 6, 30)]
    several = CronSchedule.parse("*/20 2 * * *", "America/New_York", source=SOURCE)
    # Three skipped wall-clock times collapse into one fire at 03:00 EDT.
    assert fires(several, *NEW_YORK_SPRING)[:2] == [utc(2024, 3, 10, 7), utc(2024, 3, 11, 6)]


def test_new_york_fall_back_fixed_time_once() -> None:
    cron = CronSchedule.parse("30 1 * * *", "America/New_York", source=SOURCE)
    assert fires(cron, *NEW_YORK_AUTUMN) == [utc(2024, 11, 3, 5, 30), utc(2024, 11, 4, 6, 30)]


def test_hourly_tasks_fire_in_both_passes_of_a_repeated_hour() -> None:
    cron = CronSchedule.parse("0 * * * *", "America/New_York", source=SOURCE)
    window = fires(cron, utc(2024, 11, 3, 3, 30), utc(2024, 11, 3, 8, 30))
    assert window == [utc(2024, 11, 3, hour) for hour in (4, 5, 6, 7, 8)]  # 00 01 01 02 03 local
    # Asked from inside the first pass, the second occurrence is still the next fire.
    assert cron.next_after(utc(2024, 11, 3, 5, 30)) == utc(2024, 11, 3, 6)


def test_sub_hourly_tasks_skip_the_missing_wall_clock_minutes() -> None:
    cron = CronSchedule.parse("*/30 * * * *", "Europe/Paris", source=SOURCE)
    window = fires(cron, utc(2024, 3, 31, 0, 15), utc(2024, 3, 31, 1, 45))
    assert [fire.astimezone(cron.zone).strftime("%H:%M") for fire in window] == [
        "01:30",
        "03:00",
        "03:30",
    ]


@pytest.mark.parametrize("zone", ["Europe/Paris", "America/New_York", "Australia/Lord_Howe"])
@pytest.mark.parametrize("expression", ["30 2 * * *", "0 2 * * *", "59 1 * * *", "45 3 * * *"])
def test_a_daily_task_fires_once_per_local_day_for_a_whole_year(zone: str, expression: str) -> None:
    cron = CronSchedule.parse(expression, zone, source=SOURCE)
    year = fires(cron, utc(2023, 12, 31, 12), utc(2024, 12, 31, 12))
    local_days = [fire.astimezone(cron.zone).date() for fire in year]
    assert len(year) == 366
    assert len(set(local_days)) == 366
    assert year == sorted(year)


@pytest.mark.parametrize(
    ("zone", "transition"),
    [
        ("Europe/Paris", utc(2024, 3, 31, 1)),
        ("Europe/Paris", utc(2024, 10, 27, 1)),
        ("America/New_York", utc(2024, 3, 10, 7)),
        ("America/New_York", utc(2024, 11, 3, 6)),
    ],
)
def test_every_minute_task_fires_once_per_real_minute_across_transitions(
    zone: str, transition: datetime
) -> None:
    cron = CronSchedule.parse("* * * * *", zone, source=SOURCE)
    window = fires(cron, transition - timedelta(hours=2), transition + timedelta(hours=2))
    assert len(window) == 4 * 60
    assert all(b - a == timedelta(minutes=1) for a, b in itertools.pairwise(window))


EXPRESSIONS = [
    "* * * * *",
    "*/7 * * * *",
    "0 */3 * * *",
    "15 10 * * 1-5",
    "0 0 1,15 * *",
    "30 6 * jan,jul sun",
    "5 4 29 2 *",
]


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(
    expression=st.sampled_from(EXPRESSIONS),
    instant=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
)
def test_in_utc_next_after_agrees_with_croniter(expression: str, instant: datetime) -> None:
    cron = CronSchedule.parse(expression, None, source=SOURCE)
    expected = croniter(expression, instant.replace(tzinfo=None)).get_next(datetime)
    result = cron.next_after(instant)
    assert result == expected.replace(tzinfo=UTC)
    assert cron.matches(result)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(
    expression=st.sampled_from(EXPRESSIONS),
    zone=st.sampled_from(["Europe/Paris", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"]),
    instant=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
)
def test_in_any_zone_the_next_fire_is_later_and_matches(
    expression: str, zone: str, instant: datetime
) -> None:
    cron = CronSchedule.parse(expression, zone, source=SOURCE)
    result = cron.next_after(instant)
    assert result > instant
    assert result.second == 0
    assert result.microsecond == 0
    assert cron.matches(result)
