"""`DatabaseLeaseLock`: a lease per name, kept as a row of an ordinary SQL table."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import URL, Connection, Engine, inspect
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import PoolProxiedConnection

from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling_database.dialects import Statement, StatementResult, lease_sql_for
from firefly_scheduling_database.engine import describe_url, lock_engine
from firefly_scheduling_database.schema import DEFAULT_TABLE, LeaseTables, create_if_absent

_T = TypeVar("_T")

#: Longest lease accepted: date types end at year 9999, and a century is "forever".
MAX_LEASE_SECONDS = 100 * 366 * 86_400


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

    Give it a URL (the lock builds and owns a pooled engine with bounded timeouts,
    and sends its statements straight to the pooled driver connection), an `Engine`
    (each operation is its own short transaction on a pooled connection, through
    SQLAlchemy's execution layer, so the application's event listeners see it) or a
    `Connection`. On a `Connection` already inside a transaction every operation
    runs in a savepoint, so a failed statement never aborts the caller's transaction;
    the lease then becomes visible to other nodes only when the caller commits.

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
            # Every transaction on it is ended explicitly (see `_run_on_driver`).
            bind = lock_engine(bind, reset_on_return=False)
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

    # -- BaseLock hooks -----------------------------------------------------------

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return self._attempt(lambda tx: self._take(tx, name, owner, ttl_seconds), lost=False)

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        # Lease and fence in one transaction: the fence order is the holding order.
        def take_and_fence(tx: _Transaction) -> int | None:
            if not self._take(tx, name, owner, ttl_seconds):
                return None
            return self._next_fence(tx, name)

        return self._attempt(take_and_fence, lost=None)

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
        """One transaction on a pooled DBAPI connection of the lock's own engine.

        Driver errors are wrapped as SQLAlchemy would (`DBAPIError`); a lost server
        connection is invalidated, and the pool's idle ones are dropped with it. The
        transaction is always committed or rolled back here, so the pool need not
        reset the connection on its return.
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

            result = operation(_Transaction(run, pooled.dbapi_connection))
            pooled.commit()
            return result
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
