"""Session settings that change how a server reads SQL text, set through a lock's URL.

Each is a session-level setting carried by the URL itself (MySQL's `init_command` or
`charset`, libpq's `options`), never a global one, so a case changes only its own
connections. The contract's hostile-name cases run on each, for every SQL provider
that reaches the server: each setting either works (exclusion and exact keys) or is
refused when the lock is built, and all of these work.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote


def _sql_mode(mode: str) -> str:
    """`init_command` adding `mode` to the session's sql_mode (the server's default kept)."""
    return "init_command=" + quote(f"SET SESSION sql_mode = CONCAT(@@sql_mode, ',{mode}')")


#: MySQL/MariaDB: a backslash read as itself, double quotes read as identifiers, and
#: client character sets whose second bytes include the backslash and the quote.
MYSQL_SETTINGS: Final[dict[str, str]] = {
    "NO_BACKSLASH_ESCAPES": _sql_mode("NO_BACKSLASH_ESCAPES"),
    "ANSI_QUOTES": _sql_mode("ANSI_QUOTES"),
    "charset=gbk": "charset=gbk",
    "charset=big5": "charset=big5",
    "charset=sjis": "charset=sjis",
}
#: PostgreSQL: backslashes read as escapes in ordinary string literals.
POSTGRES_SETTINGS: Final[dict[str, str]] = {
    "standard_conforming_strings=off": "options=" + quote("-c standard_conforming_strings=off"),
}


def with_setting(url: str, setting: str) -> str:
    """`url` with the query parameter `setting` added."""
    return f"{url}{'&' if '?' in url else '?'}{setting}"
