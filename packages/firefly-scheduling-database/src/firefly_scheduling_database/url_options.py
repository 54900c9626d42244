"""Which query options a database URL may carry, by dialect, checked when a lock is built.

SQLAlchemy hands a URL's query to the driver as keyword arguments: an option the
driver does not know failed every fire (PyMySQL: `TypeError`; psycopg: "invalid
connection option", reported as if the server were down), or was ignored with a
warning (SQLite). So every option is checked here first, against what the dialect's
driver reads from a URL, and an unknown one is refused naming it and the nearest
known one (`urls.connection_url.unknown_option`). Our own `max_connections` and
`journal_mode` are taken out of the URL before this check.
"""

from __future__ import annotations

import functools
import inspect
from typing import Final

from sqlalchemy import URL

from firefly_scheduling.urls.connection_url import unknown_option

#: SQLite (pysqlite and aiosqlite): the `sqlite3.connect` arguments SQLAlchemy reads
#: from a URL, and, with `uri=true`, SQLite's own URI parameters.
SQLITE_OPTIONS: Final = (
    "timeout",
    "detect_types",
    "isolation_level",
    "check_same_thread",
    "cached_statements",
    "uri",
)
SQLITE_URI_OPTIONS: Final = ("mode", "cache", "vfs", "psow", "nolock", "immutable", "modeof")
#: MySQL and MariaDB: the options that mean something in a URL (text, numbers, flags),
#: offered where the flavour's driver takes them (asyncmy has no `write_timeout`).
MYSQL_OPTIONS: Final = (
    "charset",
    "connect_timeout",
    "read_timeout",
    "write_timeout",
    "unix_socket",
    "init_command",
    "sql_mode",
    "program_name",
    "local_infile",
    "max_allowed_packet",
    "bind_address",
    "server_public_key",
)
#: TLS options SQLAlchemy gathers into the driver's `ssl` argument.
MYSQL_TLS_OPTIONS: Final = (
    "ssl_ca",
    "ssl_cert",
    "ssl_key",
    "ssl_capath",
    "ssl_cipher",
    "ssl_check_hostname",
)


def check_query(url: URL, shown: str) -> None:
    """Refuse any query option of `url` its dialect's driver would not take.

    `url` has its driver set (`postgresql+psycopg`, `mysql+asyncmy`...); `shown` is
    the URL redacted, for the message.
    """
    known = known_options(url)
    for name in url.query:
        if name not in known:
            raise unknown_option(
                name,
                provider="database",
                known=known,
                shown=shown,
                listed=url.get_backend_name() != "postgresql",
            )


def known_options(url: URL) -> tuple[str, ...]:
    """The query options `url`'s dialect and driver take."""
    backend = url.get_backend_name()
    if backend == "sqlite":
        uri = str(url.query.get("uri", "")).lower() in {"true", "1"}
        return SQLITE_OPTIONS + (SQLITE_URI_OPTIONS if uri else ())
    if backend == "postgresql":
        return _libpq_keywords()
    return _mysql_options(url.get_driver_name())


@functools.cache
def _libpq_keywords() -> tuple[str, ...]:
    # psycopg is imported for a PostgreSQL URL only, which needs it anyway.
    from psycopg import pq  # noqa: PLC0415

    return tuple(sorted(option.keyword.decode() for option in pq.Conninfo.get_defaults()))


@functools.cache
def _mysql_options(driver: str) -> tuple[str, ...]:
    """`MYSQL_OPTIONS` the `driver` takes, and the TLS options."""
    # The driver is imported for a MySQL URL only, which needs it anyway.
    if driver == "asyncmy":
        import asyncmy  # noqa: PLC0415

        accepted = set(inspect.signature(asyncmy.connect).parameters)
    else:
        import pymysql.connections  # noqa: PLC0415

        accepted = set(inspect.signature(pymysql.connections.Connection.__init__).parameters)
    return tuple(option for option in MYSQL_OPTIONS if option in accepted) + MYSQL_TLS_OPTIONS
