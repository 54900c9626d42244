"""`server_expiry`: the memcached expiry field of a lease, relative or absolute."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling import ConfigurationError
from firefly_scheduling_memcached.protocol import (
    MAX_ABSOLUTE_EXPIRY,
    MAX_RELATIVE_EXPIRY,
    server_expiry,
)

NOW = 1_767_225_600.25  # 2026-01-01T00:00:00.25Z


@given(ttl=st.floats(min_value=1e-9, max_value=MAX_RELATIVE_EXPIRY - 1))
def test_short_ttls_are_relative_and_survive_one_tick_of_the_server_clock(ttl: float) -> None:
    expire = server_expiry(ttl, NOW)
    assert isinstance(expire, int)
    # An item stored with expiry n lives more than n - 1 seconds: at least the TTL.
    assert expire - 1 >= ttl
    assert expire < ttl + 2


@pytest.mark.parametrize(("ttl", "expire"), [(0.001, 2), (1, 2), (1.5, 3), (30, 31), (59.9, 61)])
def test_relative_expiries(ttl: float, expire: int) -> None:
    assert server_expiry(ttl, NOW) == expire


@given(ttl=st.floats(min_value=MAX_RELATIVE_EXPIRY, max_value=MAX_ABSOLUTE_EXPIRY - NOW - 1))
def test_ttls_over_30_days_become_an_absolute_unix_time(ttl: float) -> None:
    expire = server_expiry(ttl, NOW)
    assert expire > MAX_RELATIVE_EXPIRY, "memcached would read it as relative"
    assert expire == math.ceil(NOW + ttl)


def test_the_30_day_boundary() -> None:
    assert server_expiry(MAX_RELATIVE_EXPIRY - 1, NOW) == MAX_RELATIVE_EXPIRY
    assert server_expiry(MAX_RELATIVE_EXPIRY - 0.5, NOW) == math.ceil(
        NOW + MAX_RELATIVE_EXPIRY - 0.5
    )


def test_a_lease_ending_after_january_2038_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="2038"):
        server_expiry(MAX_ABSOLUTE_EXPIRY - NOW + 1, NOW)
