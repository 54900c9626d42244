"""`MemcachedLock.key`: every valid lock name maps to a legal, distinct memcached key."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling_memcached import MemcachedLock

# Every name the port accepts: 1 to 255 characters, no NUL. Lone surrogates are left out:
# they are not text and cannot be encoded as UTF-8 (the key mapping refuses them).
lock_names = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=255,
)
key_functions = pytest.mark.parametrize("key_of", [MemcachedLock.key, MemcachedLock.fence_key])


def assert_legal(key: str) -> None:
    """memcached's text protocol: at most 250 bytes, no space and no control character."""
    encoded = key.encode("utf-8")
    assert len(encoded) <= 250
    assert all(0x21 <= byte <= 0x7E for byte in encoded), key


@key_functions
@given(name=lock_names)
def test_every_valid_name_maps_to_a_legal_key(key_of: Callable[[str], str], name: str) -> None:
    assert_legal(key_of(name))


@key_functions
@given(names=st.lists(lock_names, min_size=2, max_size=20, unique=True))
def test_distinct_names_map_to_distinct_keys(
    key_of: Callable[[str], str], names: list[str]
) -> None:
    assert len({key_of(name) for name in names}) == len(names)


@given(
    name=st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=255
    )
)
def test_case_variants_stay_distinct(name: str) -> None:
    variants = {name, name.lower(), name.upper(), name.swapcase()}
    assert len({MemcachedLock.key(variant) for variant in variants}) == len(variants)


def test_safe_short_names_stay_readable() -> None:
    assert MemcachedLock.key("pkg.module:Class.method") == (
        "firefly:scheduling:lock:pkg.module:Class.method"
    )
    assert MemcachedLock.fence_key("report") == "firefly:scheduling:fence:report"


@pytest.mark.parametrize(
    "name",
    ["two words", "tab\there", "new\nline", "überprüfung", "日本語", "🔒", "x" * 227, "\x7f"],
)
def test_other_names_become_a_sha256_digest(name: str) -> None:
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()
    assert MemcachedLock.key(name) == "firefly:scheduling:lock-sha256:" + digest
    assert MemcachedLock.fence_key(name) == "firefly:scheduling:fence-sha256:" + digest


def test_the_longest_readable_name_fits_exactly() -> None:
    name = "x" * (250 - len("firefly:scheduling:lock:"))
    assert MemcachedLock.key(name) == "firefly:scheduling:lock:" + name
    assert MemcachedLock.key(name + "x").startswith("firefly:scheduling:lock-sha256:")


def test_a_readable_name_cannot_imitate_a_digest_key() -> None:
    digest = hashlib.sha256(b"two words").hexdigest()
    assert MemcachedLock.key("two words") != MemcachedLock.key("-sha256:" + digest)


def test_a_name_that_is_not_valid_text_is_refused() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        MemcachedLock.key("lone \ud800 surrogate")
