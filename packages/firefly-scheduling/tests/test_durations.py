"""parse_duration: every accepted form, every refused form, and round-trip properties."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firefly_scheduling import (
    ConfigurationError,
    DurationError,
    ScheduledDescriptor,
    parse_duration,
)
from firefly_scheduling.cli.schedule import schedule_row
from firefly_scheduling.hosts.apscheduler.triggers import EpochAlignedRateTrigger
from firefly_scheduling.schedule.durations import (
    MAX_DURATION_SECONDS,
    MIN_DURATION_SECONDS,
    format_duration,
    format_elapsed,
)
from firefly_scheduling.tasks.validation import validate_descriptor

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("250ms", 0.25),
        ("30s", 30),
        ("5m", 300),
        ("1h", 3600),
        ("2d", 172800),
        ("1.5h", 5400),
        ("90", 90),
        ("1.5", 1.5),
        (".5s", 0.5),
        ("  30s  ", 30),
        ("\t5m\n", 300),
        ("250 ms", 0.25),
        ("PT5M", 300),
        ("PT1H30M", 5400),
        ("P1D", 86400),
        ("PT0.5S", 0.5),
        ("P1DT2H", 93600),
        ("P2W", 1209600),
        ("P1W", 604800),
        (" PT10S ", 10),
        ("PT1H1M1S", 3661),
        ("1h30m", 5400),
        ("2m30s", 150),
        ("1d2h", 93600),
        ("1m30s500ms", 90.5),
        ("1d2h3m4s5ms", 93784.005),
        ("1h 30m", 5400),
        ("1.5h30m", 7200),
        ("1m0.5s", 60.5),
        ("5ms", 0.005),
    ],
)
def test_accepted_text_forms(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(90, 90.0), (1.5, 1.5), (timedelta(minutes=2), 120.0), (timedelta(milliseconds=1), 0.001)],
)
def test_accepted_numbers_and_timedeltas(value: float | timedelta, seconds: float) -> None:
    result = parse_duration(value)
    assert result == seconds
    assert isinstance(result, float)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("", "cannot read ''"),
        ("   ", "cannot read '   '"),
        ("abc", "cannot read 'abc'"),
        ("-3s", "must be positive"),
        ("+3s", "must be positive"),
        ("5x", "cannot read '5x'"),
        ("5 minutes", "cannot read '5 minutes'"),
        ("30m1h", "from the largest unit to the smallest"),
        ("1m1m", "from the largest unit to the smallest"),
        ("1ms1s", "from the largest unit to the smallest"),
        ("1h30", "cannot read '1h30'"),
        ("1h-30m", "cannot read '1h-30m'"),
        ("5M", "cannot read '5M'"),
        ("PT", "at least one part"),
        ("P", "at least one part"),
        ("P1DT", "at least one part"),
        ("PT5X", "at least one part"),
        ("P1M", "no fixed length"),
        ("P1Y", "no fixed length"),
        ("P1Y2M3DT4H", "no fixed length"),
        ("0", "greater than zero"),
        ("0s", "greater than zero"),
        ("PT0S", "greater than zero"),
        ("nan", "cannot read 'nan'"),
        ("inf", "cannot read 'inf'"),
        ("1e3", "cannot read '1e3'"),
        ("9" * 400 + "d", "longer than the longest duration, 366d"),
    ],
)
def test_refused_text_forms_quote_the_text(value: str, fragment: str) -> None:
    with pytest.raises(DurationError) as raised:
        parse_duration(value, source="app.tasks:report fixed_rate")
    message = str(raised.value)
    assert message.startswith("app.tasks:report fixed_rate: ")
    assert fragment in message


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (0, "greater than zero"),
        (0.0, "greater than zero"),
        (-1, "greater than zero"),
        (-0.5, "greater than zero"),
        (math.nan, "finite"),
        (math.inf, "finite"),
        (-math.inf, "finite"),
        (True, "not a duration"),
        (False, "not a duration"),
        (timedelta(0), "greater than zero"),
        (timedelta(seconds=-5), "greater than zero"),
        (None, "expected text"),
        ([5], "expected text"),
    ],
)
def test_refused_values(value: object, fragment: str) -> None:
    with pytest.raises(DurationError, match=fragment):
        parse_duration(value)  # type: ignore[arg-type]


def test_duration_error_is_a_configuration_error_and_a_value_error() -> None:
    with pytest.raises(DurationError) as raised:
        parse_duration("abc")
    assert isinstance(raised.value, ConfigurationError)
    assert isinstance(raised.value, ValueError)


def assert_parses_within_bounds(value: str | float, expected: float) -> None:
    """`value` reads as `expected` seconds when that lies in the bounds, else is refused."""
    if MIN_DURATION_SECONDS <= expected <= MAX_DURATION_SECONDS:
        assert parse_duration(value) == pytest.approx(expected)
    else:
        refusals = r"greater than zero|at least one part|shorter than|longer than"
        with pytest.raises(DurationError, match=refusals):
            parse_duration(value)


amounts = st.integers(min_value=1, max_value=10**6)
decimals = st.decimals(min_value="0.001", max_value="100000", places=3, allow_nan=False)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(amount=amounts, unit=st.sampled_from(sorted(UNITS)))
def test_every_unit_value_parses_to_its_seconds(amount: int, unit: str) -> None:
    assert_parses_within_bounds(f"{amount}{unit}", amount * UNITS[unit])


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(amount=decimals, unit=st.sampled_from(sorted(UNITS)))
def test_every_decimal_unit_value_parses_to_its_seconds(amount: object, unit: str) -> None:
    assert_parses_within_bounds(f"{amount}{unit}", float(str(amount)) * UNITS[unit])


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(amount=amounts)
def test_every_bare_number_is_seconds(amount: int) -> None:
    assert_parses_within_bounds(str(amount), amount)
    assert_parses_within_bounds(amount, amount)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(
    weeks=st.integers(0, 50),
    days=st.integers(0, 400),
    hours=st.integers(0, 48),
    minutes=st.integers(0, 120),
    seconds=st.decimals(min_value=0, max_value=3600, places=3),
)
def test_every_iso_duration_parses_to_its_seconds(
    weeks: int, days: int, hours: int, minutes: int, seconds: object
) -> None:
    expected = weeks * 604800 + days * 86400 + hours * 3600 + minutes * 60 + float(str(seconds))
    date_part = (f"{weeks}W" if weeks else "") + (f"{days}D" if days else "")
    time_part = (
        (f"{hours}H" if hours else "")
        + (f"{minutes}M" if minutes else "")
        + (f"{seconds}S" if float(str(seconds)) else "")
    )
    text = "P" + date_part + (f"T{time_part}" if time_part else "")
    assert_parses_within_bounds(text, expected)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(seconds=st.floats(min_value=0.001, max_value=MAX_DURATION_SECONDS, allow_nan=False))
def test_timedelta_and_float_agree(seconds: float) -> None:
    assert parse_duration(timedelta(seconds=seconds)) == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.25, "250ms"),
        (7, "7s"),
        (90, "1m30s"),
        (300, "5m"),
        (5400, "1h30m"),
        (172800, "2d"),
        (1.5, "1.5s"),
        (604800, "7d"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


# -- bounds: 1 ms to 366 days, refused cleanly -------------------


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (10**400, "longer than the longest duration, 366d"),
        (-(10**400), "greater than zero"),
        ("999999999d", "'999999999d' is longer than the longest duration, 366d"),
        (366 * 86400 + 1, "longer than the longest duration"),
        ("366d1ms", "longer than the longest duration"),
        ("P53W", "longer than the longest duration"),
        (timedelta(days=999_999_999), "longer than the longest duration"),
        (0.0005, "shorter than 1ms"),
        ("0.5ms", "shorter than 1ms"),
        ("PT0.0001S", "shorter than 1ms"),
        (timedelta(microseconds=999), "shorter than 1ms"),
        (1e-300, "shorter than 1ms"),
    ],
)
def test_values_outside_the_bounds_are_duration_errors_quoting_them(
    value: object, fragment: str
) -> None:
    with pytest.raises(DurationError) as raised:
        parse_duration(value, source="app.tasks:report fixed_rate")  # type: ignore[arg-type]
    message = str(raised.value)
    assert message.startswith("app.tasks:report fixed_rate: ")
    assert fragment in message


def test_a_huge_value_is_quoted_by_its_start_and_length_not_in_full() -> None:
    with pytest.raises(DurationError) as raised:
        parse_duration(10**400)
    assert "(401 characters)" in str(raised.value)
    assert len(str(raised.value)) < 300


@pytest.mark.parametrize(
    "value", [MIN_DURATION_SECONDS, "1ms", "0.001", "PT0.001S", "366d", "P366D", 31_622_400]
)
def test_the_bounds_themselves_are_accepted(value: str | float) -> None:
    assert MIN_DURATION_SECONDS <= parse_duration(value) <= MAX_DURATION_SECONDS


@pytest.mark.parametrize("text", ["٣s", "٣", "\uff11s", "PT٣S", "1h٣0m", "²s", "3\u00a0s"])
def test_only_ascii_digits_and_spaces_are_read(text: str) -> None:
    with pytest.raises(DurationError, match="cannot read"):
        parse_duration(text)


def test_a_non_ascii_digit_is_named_as_the_problem() -> None:
    with pytest.raises(DurationError, match="ASCII digits"):
        parse_duration("٣s")


# -- format_duration: everything printed parses back ----------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.001, "1ms"),
        (60.5, "1m500ms"),
        (90.5, "1m30.5s"),
        (86399.999, "23h59m59.999s"),
        (31_622_400, "366d"),
        (93784.005, "1d2h3m4.005s"),
    ],
)
def test_format_duration_compounds(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(
    seconds=st.floats(min_value=MIN_DURATION_SECONDS, max_value=MAX_DURATION_SECONDS)
    | st.integers(min_value=1, max_value=int(MAX_DURATION_SECONDS))
)
def test_format_then_parse_gives_back_the_same_value(seconds: float) -> None:
    text = format_duration(seconds)
    assert parse_duration(text) == seconds
    assert " " not in text


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(
    text=st.builds(
        "{}d{}h{}m{}s{}ms".format,
        st.integers(0, 365),
        st.integers(0, 23),
        st.integers(0, 59),
        st.integers(0, 59),
        st.integers(1, 999),
    )
)
def test_parse_then_format_then_parse_is_stable(text: str) -> None:
    seconds = parse_duration(text)
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    "seconds",
    [0, 0.0005, MAX_DURATION_SECONDS + 1, -1, math.nan, math.inf, True, "5s", None],
)
def test_format_duration_refuses_what_parse_duration_would_refuse(seconds: object) -> None:
    with pytest.raises(ValueError, match="from 1ms to 366d"):
        format_duration(seconds)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0004, "1ms"),
        (-2.0, "1ms"),
        (12.3456789, "12.346s"),
        (90.0, "1m30s"),
        (4e7, "over 366d"),
    ],
)
def test_format_elapsed_prints_a_measured_time_to_the_millisecond(
    seconds: float, text: str
) -> None:
    assert format_elapsed(seconds) == text


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(seconds=st.floats(min_value=-1e12, max_value=1e12))
def test_an_elapsed_time_always_prints_as_a_duration_that_parses(seconds: float) -> None:
    text = format_elapsed(seconds)
    parsed = parse_duration(text.removeprefix("over "))
    if MIN_DURATION_SECONDS <= seconds <= MAX_DURATION_SECONDS:
        assert parsed == pytest.approx(seconds, abs=0.0005)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(seconds=st.floats(min_value=MIN_DURATION_SECONDS, max_value=MAX_DURATION_SECONDS))
def test_every_duration_the_schedule_listing_prints_parses_back(seconds: float) -> None:
    descriptor = validate_descriptor(
        ScheduledDescriptor(
            target="app.tasks:report",
            fixed_rate=seconds,
            initial_delay=seconds,
            lock_name="report",
            lock_ttl=seconds,
        )
    )
    row = schedule_row(descriptor, datetime(2026, 3, 4, 12, 0, tzinfo=UTC))
    assert parse_duration(row.trigger.removeprefix("fixed rate ")) == descriptor.fixed_rate
    assert parse_duration(row.lock.removeprefix("report, ttl ")) == descriptor.lock_ttl
    # The first line is the delay; the second says when the first run may come.
    assert parse_duration(row.initial_delay.split("\n")[0]) == descriptor.initial_delay
    trigger = str(EpochAlignedRateTrigger(seconds))
    assert parse_duration(trigger.removeprefix("every ").removesuffix(" (epoch-aligned)")) == (
        pytest.approx(seconds, abs=1e-6)
    )
