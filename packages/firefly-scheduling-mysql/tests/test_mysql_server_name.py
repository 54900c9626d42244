"""`MySqlNamedLock.server_name`: short, deterministic, and never merging two names.

MySQL 5.7+ compares named-lock names case-insensitively, and a collation may ignore
trailing spaces or fold accents. The property that matters is therefore stronger than
"distinct names get distinct keys": their keys must stay distinct after the server's
folding, which `_server_fold` approximates (lower-case, trailing spaces dropped).
"""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling.testing.hostile_names import HostileName, hostile_names
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.protocol import claim_many

lock_names = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=255,
)
SAFE_NAME = re.compile(r"[a-z0-9_.:/-]{1,64}")
# Names built from the characters where folding bites: letters of both cases, spaces,
# accents and the hashed prefix.
confusable_names = st.builds(
    lambda prefix, body: prefix + body,
    st.sampled_from(["", "firefly:", "FIREFLY:", "firefly"]),
    st.text(alphabet="aAbBéÉ :_-.ß", min_size=1, max_size=70),
)


def _server_fold(key: str) -> str:
    """What a case-insensitive, PAD SPACE comparison cannot tell apart."""
    return key.casefold().rstrip(" ")


def _with_case_variants(names: list[str]) -> set[str]:
    return {variant for name in names for variant in (name, name.upper(), name.lower())}


@pytest.mark.parametrize(
    "name",
    ["report", "pkg.module:class.method", "nightly-sync_2/eu", "x" * 64, "0"],
)
def test_a_safe_short_name_is_used_as_it_is(name: str) -> None:
    assert MySqlNamedLock.server_name(name) == name


@pytest.mark.parametrize(
    ("name", "server_name"),
    [
        ("A", "firefly:6dcd4ce23d88e2ee9568ba546c007c63d9131c1b"),
        ("Report", "firefly:ee45c30326b750387589752c0f75e1dd87ddc7e4"),
        ("x" * 65, "firefly:78c741ddc482e4cdf8c474a0876347a0905b6233"),
        ("firefly:job", "firefly:b94a46c442c1b3d67cd3df5d2db809fba31fc98e"),
        ("job ", "firefly:c4fd307576d385872cad40220559d256ed0431d3"),
    ],
    ids=["upper-case", "mixed-case", "65-chars", "hashed-prefix", "trailing-space"],
)
def test_an_unsafe_name_is_pinned_to_the_sha1_form(name: str, server_name: str) -> None:
    """A change here would split a fleet running two versions into two lock spaces."""
    assert MySqlNamedLock.server_name(name) == server_name


@pytest.mark.parametrize("name", ["Überprüfung", "日本語", "a b", "tab\there", "ümlaut"])
def test_non_ascii_and_blank_names_are_hashed(name: str) -> None:
    expected = "firefly:" + hashlib.sha1(name.encode()).hexdigest()
    assert MySqlNamedLock.server_name(name) == expected


@pytest.mark.parametrize("bad_name", ["", "x" * 256, "nul\x00inside"])
def test_invalid_names_are_refused_not_mapped(bad_name: str) -> None:
    with pytest.raises(ValueError):
        MySqlNamedLock.server_name(bad_name)


@given(lock_names)
def test_server_name_fits_the_64_character_limit_and_is_ascii(name: str) -> None:
    server_name = MySqlNamedLock.server_name(name)
    assert len(server_name) <= 64
    assert server_name.isascii()


@given(st.one_of(lock_names, st.from_regex(SAFE_NAME, fullmatch=True)))
def test_server_name_follows_the_documented_rule(name: str) -> None:
    """Recomputed independently, as another node (or a PHP port) would."""
    if SAFE_NAME.fullmatch(name) and not name.startswith("firefly:"):
        expected = name
    else:
        expected = "firefly:" + hashlib.sha1(name.encode("utf-8")).hexdigest()
    assert MySqlNamedLock.server_name(name) == expected


@given(st.lists(lock_names, min_size=2, max_size=20))
def test_distinct_names_never_share_a_server_lock(names: list[str]) -> None:
    distinct = _with_case_variants(names) | {name + " " for name in names if len(name) < 255}
    folded = {_server_fold(MySqlNamedLock.server_name(name)) for name in distinct}
    assert len(folded) == len(distinct)


@given(st.lists(confusable_names, min_size=2, max_size=30))
def test_confusable_names_never_share_a_server_lock(names: list[str]) -> None:
    distinct = _with_case_variants(names)
    folded = {_server_fold(MySqlNamedLock.server_name(name)) for name in distinct}
    assert len(folded) == len(distinct)


def test_a_readable_name_cannot_impersonate_a_hashed_one() -> None:
    hashed = MySqlNamedLock.server_name("Report")
    assert MySqlNamedLock.server_name(hashed) != hashed


@pytest.mark.parametrize(
    "hostile", hostile_names("0123456789", canary="firefly_scheduling_fences"), ids=repr
)
def test_a_hostile_name_reaches_the_server_only_as_inert_text(hostile: HostileName) -> None:
    """The lock writes server names into its SQL texts through the driver, whose escaping
    a session may read otherwise (NO_BACKSLASH_ESCAPES, gbk): a server name has no
    character any escaping touches, so no session setting changes what it says."""
    server = MySqlNamedLock.server_name(hostile.name)
    assert SAFE_NAME.fullmatch(server), server
    statement, parameters, _ = claim_many([(hostile.name, 30.0), (hostile.name + "'", 1.5)])
    assert all(SAFE_NAME.fullmatch(str(value)) for value in parameters.values()), parameters
    assert hostile.name not in statement
