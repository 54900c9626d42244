"""parse_duration: every accepted form, every refused form, and round-trip properties."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firefly_scheduling import ConfigurationError, DurationError, parse_duration
from firefly_scheduling.durations import format_duration

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
        ("1h30m", "cannot read '1h30m'"),
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
        ("9" * 400 + "d", "must be finite"),
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


amounts = st.integers(min_value=1, max_value=10**6)
decimals = st.decimals(min_value="0.001", max_value="100000", places=3, allow_nan=False)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(amount=amounts, unit=st.sampled_from(sorted(UNITS)))
def test_every_unit_value_parses_to_its_seconds(amount: int, unit: str) -> None:
    assert parse_duration(f"{amount}{unit}") == pytest.approx(amount * UNITS[unit])


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(amount=decimals, unit=st.sampled_from(sorted(UNITS)))
def test_every_decimal_unit_value_parses_to_its_seconds(amount: object, unit: str) -> None:
    assert parse_duration(f"{amount}{unit}") == pytest.approx(float(str(amount)) * UNITS[unit])


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(amount=amounts)
def test_every_bare_number_is_seconds(amount: int) -> None:
    assert parse_duration(str(amount)) == amount
    assert parse_duration(amount) == amount


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
    if expected == 0:
        with pytest.raises(DurationError):
            parse_duration(text)
    else:
        assert parse_duration(text) == pytest.approx(expected)


@settings(deadline=None)  # a loaded machine must not fail a logic test
@given(seconds=st.floats(min_value=0.001, max_value=10**8, allow_nan=False))
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
