# Generated from transactions_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`Transactions`: where the database lock's statements run, and in which transaction.

A lock operation is one statement (two for a fenced acquisition without a
one-statement form, a few for a batch), run on a `Transaction`. Where that
transaction is depends on what the lock was built on:

* its own engine, built from a URL: straight on a pooled driver connection, in
  autocommit (`_run_on_driver`): one round trip per statement, no `BEGIN` and no
  `COMMIT`;
* an application's engine: a short transaction of its own through SQLAlchemy's
  execution layer, so the application's event listeners see it;
* an application's connection: its transaction, or a savepoint inside one already
  open, so a failed statement never aborts the caller's transaction.

Written once, for asyncio, in `transactions_async.py`; `transactions.py` is generated
from it by `tools/async_to_sync.py`, as the lock is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection

from firefly_scheduling_database.protocol.statement import Statement, StatementResult

_T = TypeVar("_T")

Run: TypeAlias = Callable[[Statement, Mapping[str, object]], StatementResult]
RunEach: TypeAlias = Callable[[Statement, Mapping[str, object]], list[int]]
Operation: TypeAlias = Callable[["Transaction"], _T]
OnConnection: TypeAlias = Callable[[Connection], _T]


@dataclass(frozen=True)
class Transaction:
    """Statements running inside one transaction, whichever way it was opened."""

    run: Run
    #: The driver's own connection underneath, for capability checks (MySQL's flags).
    driver_connection: object
    #: A text of several statements, on the lock's own engine only (`_run_on_driver`,
    #: whose MySQL connections allow them): each statement's affected-row count.
    run_each: RunEach | None = None


class Transactions:
    """Runs a lock's operations on what it was built on (see the module doc).

    `owns_engine`: the engine is the lock's own, built from a URL in autocommit, and
    no transaction is ever left open on it; its operations go to the driver.
    """

    def __init__(self, bind: Engine | Connection, *, owns_engine: bool) -> None:
        self._bind = bind
        self._owns_engine = owns_engine
        # A connection is not safe for concurrent use; an engine hands each caller its own.
        self._connection_mutex = threading.Lock()

    def run(self, operation: Operation[_T]) -> _T:
        """Run `operation` in a transaction of its own, or in a savepoint of the caller's."""
        if isinstance(self._bind, Engine) and self._owns_engine:
            return self._run_on_driver(self._bind, operation)
        return self.run_on_sqlalchemy(lambda connection: self._through(connection, operation))

    def _through(self, connection: Connection, operation: Operation[_T]) -> _T:
        """`operation` through SQLAlchemy's execution layer, on `connection`'s transaction."""

        def run(statement: Statement, parameters: Mapping[str, object]) -> StatementResult:
            return connection.execute(statement.clause, parameters)

        driver_connection = connection.connection.driver_connection
        return operation(Transaction(run, driver_connection))

    def run_on_sqlalchemy(self, operation: OnConnection[_T]) -> _T:
        """`operation` on a SQLAlchemy connection, in a transaction (or savepoint) of its own."""
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

    def _run_on_driver(self, engine: Engine, operation: Operation[_T]) -> _T:
        """Statements on a pooled driver connection of the lock's own engine, in autocommit.

        Every operation is one statement, atomic on its own, so the connection is in
        autocommit (`engine._autocommit`): no BEGIN and no COMMIT, one round trip per
        statement. (The fenced acquire without a one-statement form is two statements
        that need no transaction around them, see `protocol.dialect`.) Driver errors are wrapped
        as SQLAlchemy would (`DBAPIError`); a lost server connection is invalidated, and
        the pool's idle ones are dropped with it. No transaction is left open, so the
        pool need not reset the connection on its return. The asyncio flavour speaks
        to the async driver's own connection (`aio_driver`); one it was interrupted
        on (a cancellation) is discarded, as its protocol state is unknown.

        MySQL's group of releases is one text of several statements in a transaction
        (`protocol.mysql`), read result by result (`run_each`) to the last, so none
        is left unread. A statement that fails stops the server's run of the text and
        is its last answer (PyMySQL and asyncmy raise it from that result's read, with
        nothing left to read): the transaction the text opened is rolled back here,
        and a connection that cannot be rolled back is discarded (`_roll_back`).
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

            def run_each(statement: Statement, parameters: Mapping[str, object]) -> list[int]:
                # PyMySQL: the first result is read by `execute`, each next one by
                # `nextset`, which raises the error of a statement that failed.
                cursor.execute(statement.driver_sql, statement.driver_parameters(parameters))
                counts = [int(cursor.rowcount)]
                while cursor.nextset():
                    counts.append(int(cursor.rowcount))
                return _answered(statement, counts, driver_error)

            return operation(Transaction(run, pooled.driver_connection, run_each))
        except driver_error as err:
            disconnected = dialect.is_disconnect(err, pooled.dbapi_connection, cursor)
            if disconnected:
                _invalidate(pooled, err)
                _dispose_pool(engine)
            else:
                _roll_back(pooled, driver_error)
            raise wrapped(err, disconnected=disconnected) from err
        except BaseException as err:
            _after_interruption(pooled, driver_error, err)
            raise
        finally:
            if cursor is not None:
                with suppress(driver_error):
                    cursor.close()
            _check_in(pooled)  # back to the pool, with no transaction open


def _check_in(pooled: PoolProxiedConnection) -> None:
    """Hand `pooled` back; a full pool closes it instead, which waits on the async driver."""
    pooled.close()


def _invalidate(pooled: PoolProxiedConnection, err: BaseException) -> None:
    """Discard a pooled connection (closing it may wait on the async driver)."""
    pooled.invalidate(err)


def _dispose_pool(engine: Engine) -> None:
    """Drop the pool's idle connections too: the server that held them went away."""
    engine.pool.dispose()


def _after_interruption(
    pooled: PoolProxiedConnection, driver_error: type[DBAPIModule.Error], err: BaseException
) -> None:
    """Make `pooled` safe to reuse after an operation stopped by an exception of ours.

    A synchronous call ran to its end, so a rollback suffices; an awaited one may have
    been cancelled halfway through the driver's protocol, so its connection goes.
    """
    _roll_back(pooled, driver_error)


def _roll_back(pooled: PoolProxiedConnection, driver_error: type[DBAPIModule.Error]) -> None:
    """End any transaction on `pooled`; one that cannot end is not pooled again.

    A connection of the lock's own engine goes back to the pool without a reset, so
    a transaction left open on it (a group of MySQL releases that failed part way,
    `protocol.mysql`) would hold its row locks for the next caller.
    """
    try:
        pooled.rollback()
    except driver_error as err:
        _invalidate(pooled, err)


def _answered(
    statement: Statement, counts: list[int], driver_error: type[DBAPIModule.Error]
) -> list[int]:
    """`counts`, a row count per statement of `statement`'s text; fewer is the driver's
    error (a server or proxy that ran part of the text without saying why)."""
    if len(counts) != statement.statements:
        raise driver_error(
            f"a text of {statement.statements} statements was answered {len(counts)} times"
        )
    return counts
