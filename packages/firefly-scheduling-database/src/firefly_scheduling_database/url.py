"""A database URL, checked before an engine is built: which driver, which options.

Only the drivers this package is tested with are accepted, under their usual
spellings: `sqlite://`, `postgresql://` / `postgres://` (mapped to psycopg 3) and
`mysql://` / `mariadb://` (mapped to PyMySQL). The asyncio lock takes the SAME URLs
and maps each to the async driver of its dialect (`ASYNC_DRIVERS`: aiosqlite,
psycopg's async connection, asyncmy), so one setting serves sync and async nodes
alike; an explicit async URL is taken as is. These tables are the only place that
knows which driver stands for which scheme.

Everything a URL may get wrong is refused here, with a `ConfigurationError` that
shows it redacted: another scheme, a URL SQLAlchemy cannot read, our own
`max_connections` and `journal_mode` out of range or out of place, an in-memory
SQLite database, a client encoding or character set the statements cannot travel
in, and any query option the dialect's driver would not take. SQLAlchemy hands a
URL's query to the driver as keyword arguments: an option the driver does not know
failed every fire (PyMySQL: `TypeError`; psycopg: "invalid connection option",
reported as if the server were down), or was ignored with a warning (SQLite). So
every option is checked against what the dialect's driver reads from a URL, and an
unknown one is refused naming it and the nearest known one
(`urls.connection_url.unknown_option`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Mapping
from typing import Any, Final

from sqlalchemy import URL, make_url
from sqlalchemy.exc import ArgumentError

from firefly_scheduling.concurrency.connection_budget import (
    ConnectionShares,
    budget_for,
    take_url_parameter,
)
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.urls.client_encodings import ascii_text_problem, libpq_encoding_problem
from firefly_scheduling.urls.connection_url import parse_lock_url, unknown_option
from firefly_scheduling.urls.redaction import redact_url, url_secrets

#: Accepted URL schemes -> the SQLAlchemy driver name used.
DRIVERS: dict[str, str] = {
    "sqlite": "sqlite+pysqlite",
    "sqlite+pysqlite": "sqlite+pysqlite",
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mysql+pymysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
    "mariadb+pymysql": "mariadb+pymysql",
}
#: The asyncio driver standing for each synchronous one (MySQL: asyncmy, measured faster
#: than aiomysql, whose 0.3.2 cannot bind bytes parameters with PyMySQL 2.2; see the docs).
ASYNC_DRIVERS: dict[str, str] = {
    "sqlite+pysqlite": "sqlite+aiosqlite",
    "postgresql+psycopg": "postgresql+psycopg_async",
    "mysql+pymysql": "mysql+asyncmy",
    "mariadb+pymysql": "mariadb+asyncmy",
}
#: Accepted URL schemes of the asyncio lock -> the SQLAlchemy async driver name used:
#: every synchronous spelling, mapped, and the async drivers' own names. (psycopg's is
#: `postgresql+psycopg` for both flavours; `psycopg_async` is no valid URL scheme.)
ASYNC_SCHEMES: dict[str, str] = {
    **{scheme: ASYNC_DRIVERS[driver] for scheme, driver in DRIVERS.items()},
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "mysql+asyncmy": "mysql+asyncmy",
    "mariadb+asyncmy": "mariadb+asyncmy",
}
#: SQLite only: `journal_mode=wal` (the default; see `_write_ahead_log`) or `keep` (the
#: file's mode is left alone: for a file other programs share and back up by copying).
JOURNAL_MODE_PARAMETER: Final = "journal_mode"
JOURNAL_MODES: Final = ("wal", "keep")
_SQLITE_MEMORY = frozenset({"", ":memory:"})


def plain_url(url: str | URL) -> str:
    """`url` as a string, password included (callers redact it before showing it)."""
    return url if isinstance(url, str) else url.render_as_string(hide_password=False)


def describe_url(url: str | URL) -> tuple[str, tuple[str, ...]]:
    """A redacted description of `url` and the secrets to scrub from driver messages."""
    text = plain_url(url)
    secrets = url_secrets(text)
    try:
        password = url.password if isinstance(url, URL) else make_url(text).password
    except (ArgumentError, ValueError):  # a malformed URL: lock_engine refuses it, redacted
        password = None
    if password:  # also in its decoded form, which is what a driver would echo
        secrets = (*secrets, str(password))
    # Nothing to hide (a SQLite file, a trusted local server): show the URL verbatim.
    return (redact_url(text) if secrets else text), secrets


def checked_url(
    url: str | URL, schemes: Mapping[str, str], max_connections: int | None
) -> tuple[URL, ConnectionShares]:
    """`url` mapped to its driver by `schemes` (`DRIVERS` or `ASYNC_SCHEMES`), checked,
    and the node's connection budget it names (`locks.connection_budget`).

    Our own query parameters (`max_connections`, `journal_mode`) are taken out of
    it; anything it may not say is a `ConfigurationError` (see the module doc).
    """
    text = plain_url(url).strip()
    parse_lock_url(text, provider="database", schemes=schemes)
    text, shares = budget_for(text, max_connections)
    text, journal_given = journal_mode(text)
    parsed = _sqlalchemy_url(text)
    parsed = parsed.set(drivername=schemes[parsed.drivername.lower()])
    check_query(parsed, redact_url(text))
    backend = parsed.get_backend_name()
    if journal_given is not None and backend != "sqlite":
        raise ConfigurationError(
            f"the database lock provider got {JOURNAL_MODE_PARAMETER}= in a {backend} URL "
            f"({redact_url(plain_url(parsed))}); it is for SQLite files only"
        )
    if backend == "sqlite":
        _refuse_memory(parsed)
    elif backend == "postgresql":
        _refuse_other_encodings(parsed)
    else:
        _refuse_bad_client_flag(parsed)
        _check_charset(parsed)
    return parsed, shares


def client_flags(url: URL) -> int:
    """The MySQL `client_flag` the URL gives (checked by `checked_url`), or 0."""
    given = url.query.get("client_flag", "0")
    return int(given if isinstance(given, str) else given[0])


def journal_mode(text: str) -> tuple[str, str | None]:
    """`text` without its `journal_mode=` parameter, and that parameter's checked value."""
    stripped, given = take_url_parameter(text, JOURNAL_MODE_PARAMETER)
    if given is not None and given not in JOURNAL_MODES:
        raise ConfigurationError(
            f"the database lock provider got {JOURNAL_MODE_PARAMETER}={given!r} in the URL "
            f"{redact_url(text)}; use wal (the default: the lock's engines switch a SQLite "
            "file to write-ahead logging) or keep (leave the file's journal mode as it is)"
        )
    return stripped, given


def _sqlalchemy_url(text: str) -> URL:
    """SQLAlchemy's reading of `text`, already checked by `parse_lock_url`."""
    try:
        return make_url(text)
    except (ArgumentError, ValueError):
        pass
    # Raised outside the handler: SQLAlchemy's message quotes the whole URL, password
    # included, and would ride along as __context__.
    raise ConfigurationError(
        f"the database lock provider got a URL SQLAlchemy cannot read: {redact_url(text)}"
    )


def _refuse_memory(url: URL) -> None:
    if (url.database or "") in _SQLITE_MEMORY or url.query.get("mode") == "memory":
        raise ConfigurationError(
            f"the database lock provider cannot use an in-memory SQLite database "
            f"({redact_url(plain_url(url))}): each connection would see its own; use a file "
            f"(sqlite:///path/locks.db), or the memory provider for one process"
        )


def _refuse_other_encodings(url: URL) -> None:
    given_options = url.query.get("options")
    given_encoding = url.query.get("client_encoding")
    problem = libpq_encoding_problem(
        given_encoding if isinstance(given_encoding, str) else None,
        given_options if isinstance(given_options, str) else None,
    )
    if problem is not None:
        raise ConfigurationError(
            f"the database lock provider cannot use {redact_url(plain_url(url))}: {problem}"
        )


def _refuse_bad_client_flag(url: URL) -> None:
    given = url.query.get("client_flag", "0")
    flags = given if isinstance(given, str) else given[0]
    if not (flags.isascii() and flags.isdigit()):
        raise ConfigurationError(
            f"the database lock provider cannot use {redact_url(plain_url(url))}: client_flag "
            f"must be a whole number, got {flags!r}"
        )


def _check_charset(url: URL) -> None:
    """Refuse the URL's `charset=` when its driver cannot write ASCII statements in it.

    Every statement is ASCII (names and texts go as hex digits, `mysql_text`), so any
    character set the driver has an ASCII-compatible codec for serves; the others
    would fail on the first connect, or never be usable at all.
    """
    given = url.query.get("charset")
    if given is None:
        return
    name = given if isinstance(given, str) else given[-1]
    driver = "asyncmy" if url.get_driver_name() == "asyncmy" else "pymysql"
    try:
        charsets: Any = importlib.import_module(f"{driver}.charset")  # the driver's own table
    except ImportError:
        return  # no driver: creating the engine says so
    charset = charsets.charset_by_name(name)
    if charset is None:
        problem: str | None = f"unknown charset {name!r}"
    else:
        problem = ascii_text_problem(charset.encoding)
        if problem is not None:
            problem = f"charset={name} cannot carry its statements: {problem}"
    if problem is not None:
        raise ConfigurationError(
            f"the database lock provider cannot use {redact_url(plain_url(url))}: {problem}"
        )


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
