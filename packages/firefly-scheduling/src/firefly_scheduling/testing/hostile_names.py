"""Lock names written to break a backend that spells names into its protocol's text.

Every valid name (non-empty, at most 255 characters, no NUL, valid Unicode) must be
its own lock on every backend. A backend that writes a name into a SQL text, a
command line or a key under rules the server does not share stores a different key
for the same name on two nodes (two holders), or lets the name end its literal and
run as a statement. These names carry what has done so somewhere: quotes and
backslashes, paramstyle markers, statement separators and comments, control
characters, characters whose encoded bytes end in an ASCII quote or backslash in a
multibyte character set (`€` before a quote under gbk, `表` under sjis, `功` under
big5), combining marks beside their precomposed twins, and 255 characters of up to
four bytes each.

`hostile_names` is the fixed list, `generated_names` a hypothesis strategy mixing
their fragments with arbitrary text, and `lookalikes` the names a wrong escaping
would turn one of them into: each must be a lock of its own.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from firefly_scheduling.locks.validation import MAX_LOCK_NAME_LENGTH

if TYPE_CHECKING:  # hypothesis is needed only by the generated-names case
    from hypothesis.strategies import SearchStrategy

#: Pieces of the fixed names, which the generated names recombine.
FRAGMENTS: Final = (
    "'",
    '"',
    "\\",
    "\\'",
    "''",
    "`",
    "%s",
    "%(x)s",
    "%%",
    "?",
    ":x",
    "$1",
    ";",
    "--",
    "#",
    "/*",
    "*/",
    "\n",
    "\r",
    "\t",
    "\x1a",
    "\x7f",
    "€",
    "\u00bf\u0027",
    "表",
    "功",
    "🔒",
    "e\u0301",
    "\u00e9",
    " ",
    "{",
    "}",
    "*",
    "\u2028",
    "\ufeff",
)


@dataclass(frozen=True)
class HostileName:
    """A name of the fixed list and what it attacks (the test's id)."""

    attack: str
    name: str


def hostile_names(unique: str, *, canary: str = "canary") -> list[HostileName]:
    """The fixed hostile names, each made unique by `unique` and at most 255 characters.

    `unique` (a short token of letters and digits) keeps one run's names from meeting
    another's on a shared server; `canary` is the table a breakout name tries to drop.
    """
    breakout = f"', 0x6f, NOW(), NOW()); DROP TABLE {canary}; -- "
    names = [
        HostileName("single quote", f"it's {unique}"),
        HostileName("double quotes", f'say "hi" {unique}'),
        HostileName("backslash", f"a\\b {unique}"),
        HostileName("backslash before a quote", f"a\\' \\\\' {unique}"),
        HostileName("breakout from a literal", f"x{breakout}{unique}"),
        HostileName("paramstyle markers", f"%s %(x)s %% ? :x $1 {unique}"),
        HostileName("separators and comments", f"; -- # /* */ {unique}"),
        HostileName("control characters", f"line\nbreak\r\ttab\x1a\x7f {unique}"),
        HostileName("emoji and combining marks", f"🔒👩‍💻 e\u0301 {unique}"),
        HostileName("gbk lead byte before a quote", f"€{breakout}{unique}"),
        HostileName("multibyte prefix", f"\u00bf\u0027 OR 1=1; -- {unique}"),
        HostileName("sjis and big5 second byte 0x5C", f"表' 功' 表\\ {unique}"),
        HostileName("255 characters", _longest(f"{unique}'\\€\"")),
        HostileName("255 four-byte characters", _longest(f"{unique}🔒")),
    ]
    for hostile in names:
        if len(hostile.name) > MAX_LOCK_NAME_LENGTH:
            raise ValueError(f"unique token {unique!r} is too long for {hostile.attack!r}")
    return names


def lookalikes(name: str) -> list[str]:
    """Names a wrong escaping or normalisation would turn `name` into, each a lock of its
    own: backslashes or quotes doubled or escaped, composed or decomposed accents."""
    variants = [
        name.replace("\\", "\\\\"),
        name.replace("'", "''"),
        name.replace("'", "\\'"),
        name.replace('"', '\\"'),
        unicodedata.normalize("NFC", name),
        unicodedata.normalize("NFD", name),
    ]
    seen: list[str] = []
    for variant in variants:
        if variant != name and len(variant) <= MAX_LOCK_NAME_LENGTH and variant not in seen:
            seen.append(variant)
    return seen


def generated_names(unique: str) -> SearchStrategy[str]:
    """Valid names of hostile fragments and arbitrary text, ending in `unique`."""
    from hypothesis import strategies  # noqa: PLC0415 - see TYPE_CHECKING

    text = strategies.text(
        strategies.characters(codec="utf-8", exclude_characters="\x00"),
        min_size=1,
        max_size=8,
    )
    pieces = strategies.lists(
        strategies.one_of(strategies.sampled_from(FRAGMENTS), text), min_size=1, max_size=12
    )
    room = MAX_LOCK_NAME_LENGTH - len(unique) - 1
    return pieces.map(lambda parts: "".join(parts)[:room] + " " + unique)


def _longest(pattern: str) -> str:
    return (pattern * MAX_LOCK_NAME_LENGTH)[:MAX_LOCK_NAME_LENGTH]
