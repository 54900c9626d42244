"""Session settings that change how a server reads SQL text, set through a lock's URL.

Each is a session-level setting carried by the URL itself (MySQL's `init_command` or
`charset`, libpq's `options`), never a global one, so a case changes only its own
connections. The contract's hostile-name cases run on each, for every SQL provider
that reaches the server: each setting either works (exclusion and exact keys) or is
refused when the lock is built, and all of these work. `MySqlCanaryClient` is the
tests' own view of such a server, on its default settings.
"""

from __future__ import annotations

import uuid
from typing import Any, Final
from urllib.parse import quote

import pymysql

from firefly_scheduling_mysql.url import connection_arguments


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


class MySqlCanaryClient:
    """A client of the test's own, on the server's default settings, and a canary table.

    A name or value a session setting made the store run as SQL would destroy the
    canary; `canary_stands` says it did not. `close` drops it with `tables`.
    """

    def __init__(self, url: str) -> None:
        self.canary = f"ff_canary_{uuid.uuid4().hex[:12]}"
        self._connection = pymysql.connect(**connection_arguments(url), autocommit=True)
        self.execute(f"CREATE TABLE {self.canary} (id INT PRIMARY KEY)")
        self.execute(f"INSERT INTO {self.canary} VALUES (1)")

    def execute(self, sql: str, arguments: object = None) -> list[tuple[Any, ...]]:
        with self._connection.cursor() as cursor:
            cursor.execute(sql, arguments)
            return list(cursor.fetchall())

    def canary_stands(self) -> bool:
        return bool(self.execute("SHOW TABLES LIKE %s", (self.canary,)))

    def close(self, *tables: str) -> None:
        for table in (*tables, self.canary):
            self.execute(f"DROP TABLE IF EXISTS {table}")
        self._connection.close()
