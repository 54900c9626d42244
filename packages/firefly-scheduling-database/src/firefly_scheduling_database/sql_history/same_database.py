"""Whether a task's connection reaches the database its run history lives in.

`current_fire().atomic(...)` writes the fire's success through the task's own
connection, to the history's table; that is exact only when both are one database.
It is decided on the client, before the block's body runs, with no round trip: the
server's kind (PostgreSQL; MySQL and MariaDB as one), host (compared as spelt, case
aside), port (the default one filled in) and database name must be equal, and for
SQLite the file's real path. A host spelt two ways (`localhost` and `127.0.0.1`) is
refused, never guessed equal; a memory SQLite database is refused (each connection
has its own). The write then names the history's own table, which must be visible
in that database as the history sees it (the same search path or schema).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy.engine import URL

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_database.url import describe_url

_DEFAULT_PORTS: Final = {"postgresql": 5432, "mysql": 3306}
_FAMILIES: Final = {"mariadb": "mysql", "postgres": "postgresql"}


@dataclass(frozen=True)
class DatabaseIdentity:
    """A database as far as the client can name it, and its description (no password)."""

    family: str
    host: str | None
    port: int | None
    database: str | None
    shown: str

    @property
    def key(self) -> tuple[str, str | None, int | None, str | None]:
        return (self.family, self.host, self.port, self.database)


def named(
    family: str, host: str | None, port: object, database: str | None, shown: str
) -> DatabaseIdentity:
    """The identity of a server database, its names normalised as the module doc says."""
    family = _FAMILIES.get(family, family)
    if family == "sqlite":
        return DatabaseIdentity("sqlite", None, None, sqlite_file(database), shown)
    number = int(str(port)) if port not in (None, "") else _DEFAULT_PORTS.get(family)
    return DatabaseIdentity(family, (host or "").lower() or None, number, database or None, shown)


def sqlite_file(database: str | None) -> str | None:
    """The real path of a SQLite database file; None for a memory database."""
    if not database or database == ":memory:" or "mode=memory" in database:
        return None
    return os.path.realpath(database.removeprefix("file:").partition("?")[0])


def of_url(url: URL) -> DatabaseIdentity:
    """The identity of the database `url` names."""
    return named(url.get_backend_name(), url.host, url.port, url.database, describe_url(url)[0])


def of_psycopg(connection: Any) -> DatabaseIdentity:
    """The identity of the database a psycopg 3 connection is connected to."""
    info = connection.info
    shown = f"postgresql://{info.user}@{info.host}:{info.port}/{info.dbname}"
    return named("postgresql", info.host, info.port, info.dbname, shown)


def refuse_unless_same(history: DatabaseIdentity, caller: DatabaseIdentity) -> None:
    """A `ConfigurationError` naming both unless `caller` is the history's database."""
    if history.family == "sqlite" and history.database is None:
        raise ConfigurationError(
            f"current_fire().atomic(): the run history is a memory SQLite database "
            f"({history.shown}), which no other connection can reach"
        )
    if caller.key != history.key:
        raise ConfigurationError(
            f"current_fire().atomic(): the task's connection reaches {caller.shown} but the "
            f"run history is in {history.shown}; the fire's outcome commits in the task's "
            "transaction only when the history is in that same database (same server kind, "
            "host as spelt, port and database name; for SQLite the same file)"
        )
