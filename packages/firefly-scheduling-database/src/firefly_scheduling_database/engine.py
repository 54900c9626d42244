"""Build the SQLAlchemy engine for a lock URL, with every wait bounded.

The URL is checked and mapped to its driver first (`url`). Each engine gets a connect
timeout and a bound on how long a statement or a row-lock wait may take, so
`try_acquire` answers within seconds even when the server hangs. Values already in
the URL's query win.

Every engine built here forgets its pooled connections in a forked child
(`firefly_scheduling.concurrency.forks`): they are the parent's sessions, and the child opening
its own is what keeps the two processes' statements apart. `dispose(close=False)`
is SQLAlchemy's way: the parent's connections are dropped without a word to the
server (psycopg, for its part, never ends a connection from a process other than
the one that opened it).

The asyncio lock's engines are built from the same URLs, on the async driver of
their dialect (`url.ASYNC_DRIVERS`).

Every engine's pool is bounded, with no overflow: the lock's engine and the one the
run history and the anchor store share (`store_engine`) each take their share of
one budget per node and server (`locks.connection_budget`: `max_connections`, 4 by
default, split 2 + 2), so a node never opens more than the budget to one server
whatever its worker count.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import URL, Engine, create_engine, event
from sqlalchemy.engine import Dialect
from sqlalchemy.pool import PoolResetState

from firefly_scheduling.concurrency.connection_budget import POOL_TIMEOUT_SECONDS
from firefly_scheduling.concurrency.forks import reset_in_forked_child
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.urls.client_encodings import LIBPQ_UTF8
from firefly_scheduling_database.provider import ASYNC_INSTALL
from firefly_scheduling_database.url import (
    ASYNC_SCHEMES,
    DRIVERS,
    checked_url,
    client_flags,
    journal_mode,
    plain_url,
)

logger = logging.getLogger("firefly_scheduling.locks")

if TYPE_CHECKING:  # the asyncio extension needs greenlet, which only the async lock needs
    from sqlalchemy.ext.asyncio import AsyncEngine

#: Which part of the node's connection budget an engine takes (`ConnectionShares`).
Share = Literal["lock", "stores"]
CONNECT_TIMEOUT_SECONDS = 5
#: Longest a statement may run (PostgreSQL) or the driver may wait for a reply (MySQL).
STATEMENT_TIMEOUT_SECONDS = 5
#: Longest a statement waits for a row another transaction has locked.
LOCK_WAIT_TIMEOUT_SECONDS = 2
#: libpq's TCP settings where the URL sets none: a statement to a vanished host (no
#: acknowledgement at all) fails within seconds instead of TCP's ~15 minutes, and an
#: idle pooled connection to one is found dead. A server that acknowledges and never
#: answers is the reply deadline's (`psycopg_connection`).
POSTGRES_TCP_DEFAULTS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}
#: Pooled connections older than this are replaced (MySQL closes idle ones after 8 h).
POOL_RECYCLE_SECONDS = 3600


def lock_engine(
    url: str | URL,
    *,
    share: Share = "lock",
    max_connections: int | None = None,
    reset_on_return: bool = True,
    autocommit: bool = False,
    multi_statements: bool = False,
) -> Engine:
    """A pooled engine for `url` with bounded timeouts; a `ConfigurationError` if unusable.

    Its pool is `share`'s part of the node's connection budget (`max_connections`, or
    the URL's query parameter of that name; see `locks.connection_budget`), with no
    overflow: a caller finding it busy waits, then gets SQLAlchemy's pool timeout.
    `reset_on_return=False` skips the pool's rollback when a connection comes back
    (a round trip on MySQL); only for callers that always end their transactions.
    `autocommit=True` switches every new connection to autocommit (`_autocommit`).
    `multi_statements=True` lets MySQL connections run a text of several statements
    (`_CLIENT_MULTI_STATEMENTS`): the lease lock sends a group of releases as one.
    """
    parsed, arguments = _engine_arguments(
        url,
        DRIVERS,
        share,
        max_connections,
        reset_on_return=reset_on_return,
        multi_statements=multi_statements,
    )
    engine = _bounded(create_engine(parsed, **arguments))
    _prepare_connections(engine, url, autocommit=autocommit)
    return engine


@dataclass
class _Shared:
    engine: Engine
    users: int


#: The protocol's SERVER_STATUS_IN_TRANS flag.
_IN_TRANSACTION = 1
#: MySQL's CLIENT_MULTI_STATEMENTS capability flag (PyMySQL's `CLIENT.MULTI_STATEMENTS`;
#: asyncmy sets it on every connection). Values are still escaped by the driver, and
#: table names are checked identifiers. Set on the engines whose owners send several
#: statements in one text: the stores' (a group of run finishes, `sql_history.driver`) and
#: the lease lock's own (a group of releases, `protocol.mysql`).
_CLIENT_MULTI_STATEMENTS = 1 << 16

_shared_mutex = threading.Lock()
#: The stores' engines of this process, by URL and pool size (passwords stay in memory).
_shared: dict[str, _Shared] = {}


def store_engine(url: str | URL, *, max_connections: int | None = None) -> Engine:
    """The engine the run history and the anchor store share for `url` in this process.

    One engine, so the two stores together keep to their share of the node's budget;
    each store hands it back with `release_store_engine` when it closes, and the last
    one disposes of it.
    """
    # The run history sends a group of finishes as one text (`sql_history.driver`).
    parsed, arguments = _engine_arguments(
        url, DRIVERS, "stores", max_connections, multi_statements=True
    )
    mysql = parsed.get_backend_name() in {"mysql", "mariadb"}
    if mysql:
        arguments["pool_reset_on_return"] = None  # `_roll_back_if_in_transaction` does it
    key = f"{plain_url(parsed)}#{arguments['pool_size']}"
    with _shared_mutex:
        shared = _shared.get(key)
        if shared is None:
            engine = _bounded(create_engine(parsed, **arguments))
            if mysql:
                event.listen(engine, "reset", _roll_back_if_in_transaction)
            _prepare_connections(engine, url, autocommit=False)
            shared = _shared[key] = _Shared(engine, 0)
        shared.users += 1
        return shared.engine


def release_store_engine(engine: Engine) -> None:
    """A store is done with `engine` (from `store_engine`); the last user disposes of it."""
    with _shared_mutex:
        for key, shared in _shared.items():
            if shared.engine is engine:
                shared.users -= 1
                if shared.users > 0:
                    return
                del _shared[key]
                break
    engine.dispose()


def async_lock_engine(
    url: str | URL,
    *,
    share: Share = "lock",
    max_connections: int | None = None,
    reset_on_return: bool = True,
    autocommit: bool = False,
    multi_statements: bool = False,
) -> AsyncEngine:
    """`lock_engine` for asyncio: the same URLs and bounds, on the async driver.

    A synchronous spelling (`sqlite:///`, `postgresql+psycopg://`, `mysql://`...) is
    mapped through `ASYNC_DRIVERS`; an async one (`sqlite+aiosqlite://`...) is kept.
    """
    from sqlalchemy.ext.asyncio import create_async_engine  # noqa: PLC0415 - see TYPE_CHECKING

    parsed, arguments = _engine_arguments(
        url,
        ASYNC_SCHEMES,
        share,
        max_connections,
        reset_on_return=reset_on_return,
        multi_statements=multi_statements,
    )
    try:
        engine = create_async_engine(parsed, **arguments)
    except ImportError as err:
        # Raised here, at construction: the async driver is missing (aiosqlite...).
        raise ConfigurationError(
            f"the database lock provider's asyncio lock needs the async driver of "
            f"{parsed.get_backend_name()}, {parsed.get_driver_name()}, which cannot be "
            f"imported ({err}); install it with: {ASYNC_INSTALL}"
        ) from None
    _prepare_connections(engine.sync_engine, url, autocommit=autocommit)
    return engine


def _engine_arguments(
    url: str | URL,
    schemes: Mapping[str, str],
    share: Share,
    max_connections: int | None,
    *,
    reset_on_return: bool = True,
    multi_statements: bool = False,
) -> tuple[URL, dict[str, Any]]:
    """The driver-mapped URL and `create_engine` keywords for `url`, checked.

    `multi_statements`: MySQL connections allow texts of several statements (other
    dialects have no such switch).
    """
    parsed, shares = checked_url(url, schemes, max_connections)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        connect_args = _sqlite_arguments(parsed)
    elif backend == "postgresql":
        connect_args = _postgres_arguments(parsed)
        if parsed.get_driver_name() == "psycopg_async":
            from firefly_scheduling_database.psycopg_connection import (  # noqa: PLC0415
                AsyncBoundedPsycopgConnection,  # psycopg is imported for PostgreSQL only
            )

            connect_args["async_creator_fn"] = AsyncBoundedPsycopgConnection.connect
    else:
        connect_args = _mysql_arguments(parsed, multi_statements=multi_statements)
    return parsed, {
        "connect_args": connect_args,
        "pool_size": getattr(shares, share),
        "max_overflow": 0,
        "pool_timeout": POOL_TIMEOUT_SECONDS,
        "pool_recycle": POOL_RECYCLE_SECONDS,
        "pool_reset_on_return": "rollback" if reset_on_return else None,
    }


def _roll_back_if_in_transaction(
    dbapi_connection: Any, record: object, reset_state: PoolResetState
) -> None:
    """The pool's reset of a MySQL store connection: a rollback only if one is due.

    The stores' writes commit before their connection goes back to the pool, and a
    read's connection is rolled back by SQLAlchemy when it closes: the pool's own
    rollback after them was one more round trip for nothing (a run's end was UPDATE,
    COMMIT and ROLLBACK). The server says in every reply whether a transaction is
    open (`SERVER_STATUS_IN_TRANS`), and PyMySQL keeps it: only then is it rolled
    back here. A driver that does not keep it is always rolled back.
    """
    if reset_state.terminate_only:
        return
    status = getattr(dbapi_connection, "server_status", _IN_TRANSACTION)
    if not isinstance(status, int) or status & _IN_TRANSACTION:
        dbapi_connection.rollback()


def _bounded(engine: Engine) -> Engine:
    """`engine`, connecting with psycopg's reply-bounded class on PostgreSQL."""
    if engine.dialect.name == "postgresql":
        from firefly_scheduling_database.psycopg_connection import (  # noqa: PLC0415
            connect_bounded,  # psycopg is imported for a PostgreSQL URL only
        )

        event.listen(engine, "do_connect", connect_bounded)
    return engine


def _prepare_connections(engine: Engine, url: str | URL, *, autocommit: bool) -> None:
    """What every engine built here does to its new connections, and after a fork.

    `autocommit`: see `_autocommit`. A SQLite file is put in write-ahead-log mode
    (`_write_ahead_log`) unless `url` says `journal_mode=keep`.
    """
    if autocommit:
        event.listen(engine, "connect", partial(_autocommit, engine.dialect))
    _, journal = journal_mode(plain_url(url).strip())
    if engine.dialect.name == "sqlite" and journal != "keep":
        event.listen(engine, "connect", _write_ahead_log)
    reset_in_forked_child(engine, _forget_parent_connections)


def _write_ahead_log(dbapi_connection: Any, record: object) -> None:
    """Put the SQLite file of a new connection in write-ahead-log mode (the `connect` event).

    Why: every claim, acquisition, release and history row is a write transaction,
    and in SQLite's default rollback-journal mode each commit costs several
    fsyncs and holds the file's only write lock meanwhile. In WAL mode a commit is
    one append and one fsync (`synchronous` stays FULL, so a commit is as durable
    as before) and readers no longer block the writer: an upsert and commit measured
    0.82 ms of wall time and 0.33 ms of CPU in rollback mode, 0.26 and 0.12 in WAL
    (500 commits, this repository's 2-core machine). The mode is stored in the
    file, so every process using it follows; a URL with `journal_mode=keep` leaves
    a file that other programs share (and back up by copying it alone) as it is.
    WAL needs the processes on one host (shared memory), which SQLite needs for
    locking anyway. A database that cannot switch answers the mode it kept, and the
    lock works in it, slower: that is logged, once per connection. (A read-only file
    fails here, at connect, as every write of the lock would fail on it.)
    """
    del record
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        row = cursor.fetchone()
    finally:
        cursor.close()
    mode = str(row[0]).lower() if row else "unknown"
    if mode != "wal":
        logger.warning(
            "database lock: the SQLite file stays in journal mode %r, not 'wal'; every "
            "write costs several fsyncs under the file's only write lock",
            mode,
        )


def _autocommit(dialect: Dialect, dbapi_connection: Any, record: object) -> None:
    """Switch a new connection of a lock's own engine to autocommit (the `connect` event).

    On an async engine `dbapi_connection` is SQLAlchemy's adapter around the async
    driver's connection, and the event runs where it may wait on it.
    """
    del record
    dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")


def _forget_parent_connections(engine: Engine) -> None:
    """In a forked child: a fresh pool, the parent's connections untouched."""
    engine.dispose(close=False)


def _sqlite_arguments(url: URL) -> dict[str, Any]:
    # The busy timeout: how long a writer waits for another connection's write lock.
    return {} if "timeout" in url.query else {"timeout": STATEMENT_TIMEOUT_SECONDS}


def _postgres_arguments(url: URL) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        key: value for key, value in POSTGRES_TCP_DEFAULTS.items() if key not in url.query
    }
    if "client_encoding" not in url.query:
        # Names are bound in the client encoding: only UTF-8 carries every valid one,
        # and without it libpq would take PGCLIENTENCODING or the server's default.
        arguments["client_encoding"] = LIBPQ_UTF8
    if "connect_timeout" not in url.query:
        arguments["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
    # Ours first: a setting the URL's own `options` repeats is applied later and wins.
    options = (
        f"-c statement_timeout={STATEMENT_TIMEOUT_SECONDS * 1000} "
        f"-c lock_timeout={LOCK_WAIT_TIMEOUT_SECONDS * 1000}"
    )
    given = url.query.get("options")
    arguments["options"] = f"{options} {given}" if isinstance(given, str) else options
    return arguments


def _mysql_arguments(url: URL, *, multi_statements: bool = False) -> dict[str, Any]:
    bounds: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "read_timeout": STATEMENT_TIMEOUT_SECONDS,
        "write_timeout": STATEMENT_TIMEOUT_SECONDS,
        "init_command": f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_TIMEOUT_SECONDS}",
    }
    if url.get_driver_name() == "asyncmy":
        # asyncmy bounds reads only; a write to a hung server waits on the kernel's buffer.
        del bounds["write_timeout"]
    arguments: dict[str, Any] = {
        key: value for key, value in bounds.items() if key not in url.query
    }
    # SQLAlchemy always adds CLIENT_FOUND_ROWS (2), which makes an unchanged upsert
    # report 1 like an insert; these values replace the flags it would pass.
    arguments["client_flag"] = client_flags(url) & ~2
    if multi_statements:
        arguments["client_flag"] |= _CLIENT_MULTI_STATEMENTS
    return arguments
