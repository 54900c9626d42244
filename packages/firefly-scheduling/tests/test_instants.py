"""`as_utc`: every instant in UTC, a naive one refused, a UTC one passed through."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from firefly_scheduling.schedule.instants import as_utc


def test_an_instant_already_in_utc_is_returned_as_it_is() -> None:
    instant = datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert as_utc(instant) is instant


def test_an_instant_in_another_zone_is_converted() -> None:
    paris = timezone(timedelta(hours=1))
    converted = as_utc(datetime(2030, 1, 1, 13, 0, tzinfo=paris))
    assert converted == datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    assert converted.tzinfo is UTC


def test_a_zero_offset_zone_that_is_not_utc_becomes_utc() -> None:
    converted = as_utc(datetime(2030, 1, 1, 12, 0, tzinfo=timezone(timedelta(0), "GMT")))
    assert converted.tzinfo is UTC


def test_a_naive_instant_is_refused_and_named() -> None:
    with pytest.raises(ValueError, match="naive 2030-01-01T12:00:00"):
        as_utc(datetime(2030, 1, 1, 12, 0))
