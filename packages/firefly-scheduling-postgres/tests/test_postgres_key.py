"""`PgAdvisoryLock.key`: the PHP original's name-to-key formula, exactly."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling_postgres import PgAdvisoryLock

lock_names = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=255,
)


def test_key_of_a_name_with_a_published_digest() -> None:
    # sha256("a") = ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb
    assert PgAdvisoryLock.key("a") == 0xCA978112CA1BBDC - 2**59


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("report", 19678063506857609),
        ("Report", 246826654548650263),
        ("pkg.module:Class.method", -221963023350434884),
        ("überprüfung-日本語", 6227022525499840),
    ],
)
def test_key_is_pinned_for_known_names(name: str, key: int) -> None:
    """A change here would split a mixed PHP/Python fleet into two lock spaces."""
    assert PgAdvisoryLock.key(name) == key


@given(lock_names)
def test_key_is_the_top_60_bits_of_sha256_shifted_to_signed(name: str) -> None:
    top_60_bits = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big") >> 4
    assert PgAdvisoryLock.key(name) == top_60_bits - 2**59


@given(lock_names)
def test_key_fits_a_bigint_and_is_stable(name: str) -> None:
    key = PgAdvisoryLock.key(name)
    assert -(2**59) <= key < 2**59
    assert PgAdvisoryLock.key(name) == key


def test_names_differing_only_in_case_get_different_keys() -> None:
    assert PgAdvisoryLock.key("Report") != PgAdvisoryLock.key("report")
    assert PgAdvisoryLock.key("report") != PgAdvisoryLock.key("report ")


def test_key_is_callable_on_an_instance_too() -> None:
    lock = PgAdvisoryLock("postgresql://app@127.0.0.1:1/app")
    assert lock.key("report") == PgAdvisoryLock.key("report")


def test_a_name_that_is_not_valid_unicode_is_refused() -> None:
    with pytest.raises(ValueError, match="UTF-8"):
        PgAdvisoryLock.key("lone \ud800 surrogate")
