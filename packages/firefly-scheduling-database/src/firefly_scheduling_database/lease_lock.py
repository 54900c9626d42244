"""`DatabaseLeaseLock`: a lease per name, kept as a row of an ordinary SQL table."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import URL, Connection, Engine, event, inspect
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import PoolProxiedConnection

from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling_database.dialects import Statement, StatementResult, lease_sql_for
from firefly_scheduling_database.engine import describe_url, lock_engine
from firefly_scheduling_database.schema import DEFAULT_TABLE, LeaseTables, create_if_absent

_T = TypeVar("_T")

logger = logging.getLogger("firefly_scheduling.locks")

#: Longest lease accepted: date types end at year 9999, and a century is "forever".
MAX_LEASE_SECONDS = 100 * 366 * 86_400
#: Seconds between two purges of expired leases by one instance (with up to 50 % jitter).
PURGE_INTERVAL_SECONDS = 60.0


@dataclass(frozen=True)
class _Transaction:
    """Statements running inside one transaction, whichever way it was opened."""

    run: Callable[[Statement, Mapping[str, object]], StatementResult]
    #: The DBAPI connection underneath, for driver capability checks.
    driver_connection: object


class DatabaseLeaseLock(BaseLock):
    """A lease lock in a table of SQLite, PostgreSQL or MySQL/MariaDB (SQLAlchemy 2).

    Each held name is a row carrying the acquisition's owner token and a
    `locked_until` instant from the DATABASE's clock; an expired row is taken over by
    the next acquirer, so a crashed holder frees its names after the TTL. Acquire,
    release and renew are one statement each (see `dialects`).

    Give it a URL (the lock builds and owns a pooled engine with bounded timeouts, in
    autocommit, and sends its statements straight to the pooled driver connection: one
    round trip per operation, see `_run_on_driver`), an `Engine`
    (each operation is its own short transaction on a pooled connection, through
    SQLAlchemy's execution layer, so the application's event listeners see it) or a
    `Connection`. On a `Connection` already inside a transaction every operation
    runs in a savepoint, so a failed statement never aborts the caller's transaction;
    the lease then becomes visible to other nodes only when the caller commits.

    Expired rows are deleted (`purge_expired`) by every instance built on a URL or an
    Engine about once a minute, at the end of an acquisition: fire claims are never
    released, only left to expire, and would otherwise stay in the table forever.

    The tables must exist: `install()` or `firefly-scheduling migrate` creates them.
    A missing table is reported as a `ConfigurationError` rather than created on the
    fly, because DDL inside a caller's transaction (MySQL commits it implicitly) or
    under an application role without CREATE rights would surprise.
    """

    backend_name = "database"
    ttl_honoured = True
    session_scoped = False
    cross_process = True
    supports_fencing = True
    renewable = True
    driver_errors = (SQLAlchemyError, OSError)

    def __init__(
        self,
        url_or_engine_or_connection: str | URL | Engine | Connection,
        *,
        table: str = DEFAULT_TABLE,
    ) -> None:
        bind = url_or_engine_or_connection
        tables = LeaseTables.named(table)
        owns_engine = isinstance(bind, str | URL)
        if isinstance(bind, str | URL):
            # No transaction is ever left open on it (see `_run_on_driver`).
            bind = lock_engine(bind, reset_on_return=False)
            event.listen(bind, "connect", partial(_autocommit, bind))
        elif not isinstance(bind, Engine | Connection):
            raise ConfigurationError(
                f"DatabaseLeaseLock needs a URL, an Engine or a Connection, "
                f"got {type(bind).__name__}"
            )
        target, secrets = describe_url(bind.engine.url)
        super().__init__(target=target, secrets=secrets)
        self._sql = lease_sql_for(bind.dialect, tables)
        self._tables = tables
        self._bind: Engine | Connection = bind
        self._owns_engine = owns_engine
        # A Connection is not thread-safe; an Engine hands each thread its own.
        self._connection_mutex = threading.Lock()
        # Only where a purge is its own transaction, never inside a caller's.
        self._purges = isinstance(bind, Engine)
        self._next_purge = time.monotonic() + _purge_pause() / 2

    @property
    def tables(self) -> LeaseTables:
        """The lease table and the fence table, as SQLAlchemy `Table`s."""
        return self._tables

    def install(self) -> None:
        """Create both tables if they are absent; safe to run again and on several nodes."""
        for table in self._tables.all:
            try:
                self._run_on_sqlalchemy(partial(create_if_absent, table=table))
            except SQLAlchemyError as err:
                # Two nodes creating the same table at once: one loses on the catalog.
                if self._exists(table.name):
                    continue
                raise LockBackendError(
                    f"database lock backend {self._target} could not create table "
                    f"{table.name!r}: {self._describe(err)}"
                ) from err

    def purge_expired(self) -> int:
        """Delete every expired lease row; return how many went. One statement.

        Safe at any time: an expired lease is free already (the next acquirer would
        take it over), so deleting its row changes nothing but the table's size.
        """
        return self._run(lambda tx: tx.run(self._sql.purge, {}).rowcount)

    # -- BaseLock hooks -----------------------------------------------------------

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        won = self._attempt(lambda tx: self._take(tx, name, owner, ttl_seconds), lost=False)
        self._purge_when_due()
        return won

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        statement = self._sql.acquire_fenced
        if statement is not None:  # one statement: lease and fence commit together
            parameters = {
                "name": self._sql.key(name),
                "owner": owner,
                "ttl": self._sql.ttl(_lease_seconds(ttl_seconds)),
            }
            return self._attempt(
                lambda tx: self._sql.fenced_value(tx.run(statement, parameters)), lost=None
            )
        if not self._acquire(name, owner, ttl_seconds):
            return None
        # The fence counts only while the lease is still ours, so the token order is the
        # holding order even though the two statements commit separately.
        try:
            token = self._attempt(lambda tx: self._fence_held(tx, name, owner), lost=None)
        except BaseException:
            self._release(name, owner)
            raise
        if token is None:  # the lease lapsed in between (a pause longer than the TTL), or a
            self._release(name, owner)  # lock wait on the counter timed out: a lost race
        return token

    def _release(self, name: str, owner: str) -> bool:
        parameters = {"name": self._sql.key(name), "owner": owner}
        return self._run(lambda tx: tx.run(self._sql.release, parameters).rowcount == 1)

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        parameters = {
            "name": self._sql.key(name),
            "owner": owner,
            "ttl": self._sql.ttl(_lease_seconds(ttl_seconds)),
        }
        return self._run(lambda tx: tx.run(self._sql.renew, parameters).rowcount == 1)

    def _fence(self, name: str) -> int:
        return self._run(lambda tx: self._next_fence(tx, name))

    def _close(self) -> None:
        if self._owns_engine and isinstance(self._bind, Engine):
            self._bind.dispose()

    def _describe(self, err: BaseException) -> str:
        # The driver's own message, without SQLAlchemy's statement and parameter dump.
        if isinstance(err, DBAPIError) and err.orig is not None:
            return super()._describe(err.orig)
        return super()._describe(err)

    # -- statements -------------------------------------------------------------

    def _take(self, tx: _Transaction, name: str, owner: str, ttl_seconds: float) -> bool:
        key = self._sql.key(name)
        ttl = self._sql.ttl(_lease_seconds(ttl_seconds))
        result = tx.run(self._sql.acquire, {"name": key, "owner": owner, "ttl": ttl})
        won = self._sql.acquired(result.rowcount, tx.driver_connection)
        if won is None:  # the rowcount was ambiguous; the row is locked by us now
            holder = tx.run(self._sql.holder, {"name": key}).fetchone()
            won = holder is not None and holder[0] == owner
        return won

    def _next_fence(self, tx: _Transaction, name: str) -> int:
        return self._sql.fence_value(tx.run(self._sql.fence, {"name": self._sql.key(name)}))

    def _fence_held(self, tx: _Transaction, name: str, owner: str) -> int | None:
        statement = self._sql.fence_held
        if statement is None:  # pragma: no cover - every dialect has one form or the other
            raise NotImplementedError(f"the {self._sql.dialect_names[0]} dialect cannot fence")
        parameters = {"name": self._sql.key(name), "owner": owner}
        return self._sql.fenced_value(tx.run(statement, parameters))

    def _purge_when_due(self) -> None:
        """Purge expired leases about once a minute; a failure only delays the next one."""
        if not self._purges or time.monotonic() < self._next_purge:
            return
        self._next_purge = time.monotonic() + _purge_pause()
        try:
            purged = self.purge_expired()
        except SQLAlchemyError as err:
            logger.debug("database lock %s: purging expired leases failed: %s", self._target, err)
        else:
            logger.debug("database lock %s: purged %d expired leases", self._target, purged)

    # -- transactions -------------------------------------------------------------

    def _run(self, operation: Callable[[_Transaction], _T]) -> _T:
        """Run `operation` in a transaction of its own, or in a savepoint of the caller's."""
        if isinstance(self._bind, Engine) and self._owns_engine:
            return self._run_on_driver(self._bind, operation)
        return self._run_on_sqlalchemy(lambda connection: operation(_through(connection)))

    def _run_on_sqlalchemy(self, operation: Callable[[Connection], _T]) -> _T:
        if isinstance(self._bind, Engine):
            with self._bind.begin() as connection:
                return operation(connection)
        with self._connection_mutex:
            connection = self._bind
            transaction = (
                connection.begin_nested() if connection.in_transaction() else connection.begin()
            )
            with transaction:
                return operation(connection)

    def _run_on_driver(self, engine: Engine, operation: Callable[[_Transaction], _T]) -> _T:
        """Statements on a pooled DBAPI connection of the lock's own engine, in autocommit.

        Every operation is one statement, atomic on its own, so the connection is in
        autocommit (`_autocommit`): no BEGIN and no COMMIT, one round trip per
        statement. (The fenced acquire without a one-statement form is two statements
        that need no transaction around them, see `dialects`.) Driver errors are wrapped
        as SQLAlchemy would (`DBAPIError`); a lost server connection is invalidated, and
        the pool's idle ones are dropped with it. No transaction is left open, so the
        pool need not reset the connection on its return.
        """
        dialect = engine.dialect
        driver_error: type[DBAPIModule.Error] = dialect.loaded_dbapi.Error

        def wrapped(err: DBAPIModule.Error, *, disconnected: bool = False) -> BaseException:
            return DBAPIError.instance(
                None, None, err, driver_error, connection_invalidated=disconnected, dialect=dialect
            )

        try:
            pooled = engine.raw_connection()  # the pool does not wrap connect errors
        except driver_error as err:
            raise wrapped(err) from err
        cursor: Any = None
        try:
            cursor = pooled.cursor()

            def run(statement: Statement, parameters: Mapping[str, object]) -> StatementResult:
                cursor.execute(statement.driver_sql, statement.driver_parameters(parameters))
                return cursor  # type: ignore[no-any-return]

            return operation(_Transaction(run, pooled.dbapi_connection))
        except driver_error as err:
            disconnected = dialect.is_disconnect(err, pooled.dbapi_connection, cursor)
            if disconnected:
                pooled.invalidate(err)
                engine.pool.dispose()
            else:
                _roll_back(pooled, driver_error)
            raise wrapped(err, disconnected=disconnected) from err
        except BaseException:
            _roll_back(pooled, driver_error)
            raise
        finally:
            if cursor is not None:
                with suppress(driver_error):
                    cursor.close()
            pooled.close()  # back to the pool, with no transaction open

    def _attempt(self, operation: Callable[[_Transaction], _T], *, lost: _T) -> _T:
        """Run an acquisition; a lost race is `lost`, a missing table a ConfigurationError."""
        try:
            return self._run(operation)
        except DBAPIError as err:
            if self._sql.is_missing_table(err):
                raise ConfigurationError(
                    f"database lock backend {self._target}: table "
                    f"{self._tables.locks.name!r} or {self._tables.fences.name!r} does not "
                    f"exist; create them once with `firefly-scheduling migrate` or "
                    f"DatabaseLeaseLock.install()"
                ) from err
            if self._sql.is_contention(err):
                return lost  # another transaction held or raced for the row
            raise

    def _exists(self, table: str) -> bool:
        try:
            return self._run_on_sqlalchemy(lambda connection: inspect(connection).has_table(table))
        except SQLAlchemyError:
            return False


def _autocommit(engine: Engine, dbapi_connection: Any, record: object) -> None:
    """Switch a new connection of the lock's own engine to autocommit (the `connect` event)."""
    del record
    engine.dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")


def _purge_pause() -> float:
    # Jitter keeps a fleet's nodes from purging the same rows at the same moment.
    return PURGE_INTERVAL_SECONDS * random.uniform(1.0, 1.5)  # noqa: S311 - not a secret


def _roll_back(pooled: PoolProxiedConnection, driver_error: type[DBAPIModule.Error]) -> None:
    with suppress(driver_error):
        pooled.rollback()


def _through(connection: Connection) -> _Transaction:
    """Statements through SQLAlchemy's execution layer, on `connection`'s transaction."""

    def run(statement: Statement, parameters: Mapping[str, object]) -> StatementResult:
        return connection.execute(statement.clause, parameters)

    return _Transaction(run, connection.connection.dbapi_connection)


def _lease_seconds(ttl_seconds: float) -> float:
    if ttl_seconds > MAX_LEASE_SECONDS:
        raise ConfigurationError(
            f"ttl_seconds={ttl_seconds!r} is longer than the database lock backend supports "
            f"({MAX_LEASE_SECONDS} seconds, about a century)"
        )
    return ttl_seconds
