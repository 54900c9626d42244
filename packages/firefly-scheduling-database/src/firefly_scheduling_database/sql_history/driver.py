"""The run history's per-fire statements straight on the pooled driver connection.

Every fire a node wins reads the task's unfinished runs, inserts its own row and
updates it at the end: three single statements. Through SQLAlchemy's execution
layer each cost about 0.45 ms of CPU, two thirds of it the layer's own work (a
`Connection`, its autobegin, result objects); the same statement sent by psycopg on
a connection of the same pool, in autocommit, cost 0.17 ms (measured on
the unfinished-runs read). So on PostgreSQL those three go here: compiled once from
the store's SQLAlchemy statements (the SQL is the same text, in the driver's
paramstyle), sent on a pooled connection switched to autocommit for the call
(psycopg switches client-side, no round trip) and back.

On MySQL the finish, the unfinished-runs read and the batch start come here too. PyMySQL would send
`SET autocommit` both ways, so the connection stays in its transactional mode and
the statement is followed by `COMMIT`, the two round trips SQLAlchemy sent, without
the layer: 0.09 against 0.19 ms of CPU for a finish (measured one at a
time on MariaDB). SQLite keeps SQLAlchemy (it is a file).

What SQLAlchemy did around them is done here too: instants are bound as naive UTC
and read back aware (the column type's `UtcDateTime` rules), a driver error becomes
SQLAlchemy's `DBAPIError` (the store's `_call` turns it into a `HistoryError` without
the password), and a connection the server dropped is discarded with the pool's idle
ones, so the next call reconnects.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.engine.interfaces import DBAPIModule
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler

from firefly_scheduling.schedule.instants import as_utc
from firefly_scheduling_database.mysql_text import (
    HEX_DIALECTS,
    HexBoundName,
    checked_inert,
    hex_text,
)

_R = TypeVar("_R")


class DriverStatement:
    """One of the store's statements, compiled once for the driver, with its fixed values.

    On MySQL the parameters whose column type sends hex digits (`mysql_text`) are
    written as such here, as SQLAlchemy's bind processing would.
    """

    def __init__(self, statement: sa.ClauseElement, engine: Engine) -> None:
        dialect = engine.dialect
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)  # a statement's compiler, with its binds
        self.sql: str = compiled.string
        mysql = dialect.name in HEX_DIALECTS
        #: The parameters sent as hex digits (MySQL).
        self._hex = frozenset(
            name
            for name, bind in compiled.binds.items()
            if mysql and isinstance(bind.type, HexBoundName)
        )
        # The values SQLAlchemy bound from literals in the statement (a state's name).
        self._fixed = {
            name: hex_text(value) if name in self._hex else value
            for name, value in compiled.params.items()
            if value is not None
        }
        self._bound = _mysql_text if mysql else _naive

    def parameters(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """`values` over the fixed ones: instants (alone or in a list) as the naive UTC
        the columns hold, names and texts as hex digits where their column wants them."""
        bound = dict(self._fixed)
        convert = self._bound
        for name, value in values.items():
            if name in self._hex and isinstance(value, str):
                bound[name] = hex_text(value)
            elif isinstance(value, list):
                bound[name] = [convert(item) for item in value]
            else:
                bound[name] = convert(value)
        return bound


def _naive(value: Any) -> Any:
    """An instant as the naive UTC the columns hold; any other value as it is."""
    return as_utc(value).replace(tzinfo=None) if isinstance(value, datetime) else value


def _mysql_text(value: Any) -> Any:
    """MySQL: an instant as the text of the naive UTC `DATETIME(6)` it is stored as.

    PyMySQL would write the same text from the datetime, by a `str.format` per value;
    an escaped string is cheaper, and the instants of a batch repeat, so each is
    written once (`_instant_text`). For a batch start that formatting, with the
    conversion to naive UTC, was a third of its CPU.
    """
    return _instant_text(value) if isinstance(value, datetime) else value


@functools.lru_cache(maxsize=1024)
def _instant_text(instant: datetime) -> str:
    return as_utc(instant).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


class DriverPath:
    """Runs `DriverStatement`s on connections of `engine`'s pool, each on its own.

    PostgreSQL: in autocommit. MySQL: followed by `COMMIT`.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def rows(self, statement: DriverStatement, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The rows `statement` returns, by column name, instants aware UTC."""
        return self._send(statement, values, fetch=True)[0]

    def rowcount(self, statement: DriverStatement, values: Mapping[str, Any]) -> int:
        """How many rows `statement` matched."""
        return self._send(statement, values, fetch=False)[1]

    def rowcounts_together(
        self, statements: Sequence[tuple[DriverStatement, Mapping[str, Any]]]
    ) -> list[int]:
        """MySQL: how many rows each statement matched, all sent as one text with `COMMIT`.

        One round trip for a group of writes (`GroupedCalls`): the driver escapes each
        statement's values as it does for one, and the texts go joined by `;` (the
        stores' connections allow several statements, see `engine.store_engine`).
        The server stops at the first statement that fails, before the `COMMIT`, and
        the pool rolls the open transaction back: a group is written whole or not at
        all.
        """
        return self._on_connection(lambda connection: _rowcounts(connection, statements))

    def read_then_insert(
        self,
        read: DriverStatement,
        values: Mapping[str, Any],
        insert: DriverStatement,
        choose: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    ) -> list[dict[str, Any]] | None:
        """MySQL: `read`, then `insert` of the rows `choose` picks given its rows, committed.

        One transaction: the inserted rows, or None when a duplicate key refused the
        insert (rolled back: nothing of it stands). The rows go as one multi-row
        `INSERT` (PyMySQL's `executemany`). Through SQLAlchemy, the bound values'
        processing and its execution layer were most of a batch start's CPU on MySQL,
        about a tenth of a winning node's.
        """
        duplicate: type[Exception] = self._engine.dialect.loaded_dbapi.IntegrityError

        def send(connection: Any) -> list[dict[str, Any]] | None:
            with closing(connection.cursor()) as cursor:
                cursor.execute(read.sql, read.parameters(values))
                chosen = choose(_aware(cursor))
                if chosen:
                    try:
                        cursor.execute(_rows_inserted(cursor, insert, chosen))
                    except duplicate:
                        connection.rollback()
                        return None
                connection.commit()
            return chosen

        return self._on_connection(send)

    def _send(
        self, statement: DriverStatement, values: Mapping[str, Any], *, fetch: bool
    ) -> tuple[list[dict[str, Any]], int]:
        mysql = self._engine.dialect.name != "postgresql"

        def send(connection: Any) -> tuple[list[dict[str, Any]], int]:
            with closing(connection.cursor()) as cursor:
                cursor.execute(statement.sql, statement.parameters(values))
                rows = _aware(cursor) if fetch else []
                if mysql:
                    connection.commit()  # a write's end, or a read's snapshot's
                return rows, int(cursor.rowcount)

        return self._on_connection(send)

    def _on_connection(self, work: Callable[[Any], _R]) -> _R:
        """`work(driver connection)` on a pooled connection, errors as SQLAlchemy's."""
        dialect = self._engine.dialect
        driver_error: type[DBAPIModule.Error] = dialect.loaded_dbapi.Error
        try:
            pooled = self._engine.raw_connection()
        except driver_error as err:  # the pool does not wrap connect errors
            raise _wrapped(err, driver_error, self._engine) from err
        postgres = dialect.name == "postgresql"
        try:
            connection: Any = pooled.driver_connection
            if postgres:
                connection.autocommit = True
            try:
                return work(connection)
            finally:
                # Back to the pool's mode; a connection the server dropped cannot be
                # switched (psycopg would raise over the real error) and is discarded.
                if postgres and not connection.closed:
                    connection.autocommit = False
        except driver_error as err:
            disconnected = dialect.is_disconnect(err, pooled.dbapi_connection, None)
            if disconnected:
                pooled.invalidate(err)
                self._engine.pool.dispose()  # the server that held the idle ones went away
            raise _wrapped(err, driver_error, self._engine, disconnected=disconnected) from err
        finally:
            pooled.close()


def _rows_inserted(cursor: Any, insert: DriverStatement, rows: Sequence[Mapping[str, Any]]) -> str:
    """One multi-row `INSERT` of `rows`, its values written by the driver (PyMySQL).

    What PyMySQL's `executemany` would send, had it recognised the row of placeholders
    (it does not under `UNHEX(...)`, and would send one INSERT per row).
    """
    head, separator, row = insert.sql.partition(" VALUES ")
    if not separator:
        raise ValueError(f"not a single-row INSERT: {insert.sql!r}")
    values = ", ".join(cursor.mogrify(row, insert.parameters(each)) for each in rows)
    return f"{head} VALUES {values}"


def _rowcounts(
    connection: Any, statements: Sequence[tuple[DriverStatement, Mapping[str, Any]]]
) -> list[int]:
    """`DriverPath.rowcounts_together` on a PyMySQL connection.

    Its values are checked `inert` first: in a text of several statements a value
    that ended its literal would run statements of its own.
    """
    with closing(connection.cursor()) as cursor:
        bound = [(sent.sql, sent.parameters(values)) for sent, values in statements]
        for _, parameters in bound:
            checked_inert(parameters)
        texts = [cursor.mogrify(sql, parameters) for sql, parameters in bound]
        cursor.execute(";".join([*texts, "COMMIT"]))  # no arguments: nothing is formatted
        counts = [int(cursor.rowcount)]
        while len(counts) < len(statements):
            if not cursor.nextset():
                import pymysql  # noqa: PLC0415 - MySQL's driver, for MySQL only

                raise pymysql.err.InterfaceError(
                    f"{len(statements)} statements sent, {len(counts)} answered"
                )
            counts.append(int(cursor.rowcount))
        while cursor.nextset():  # the COMMIT's answer
            pass
    return counts


def _aware(cursor: Any) -> list[dict[str, Any]]:
    """The rows by column name, as the table's column types would read them.

    Instants come back aware UTC (`UtcDateTime`), and bytes as UTF-8 text: on MySQL
    the lock name is a VARBINARY (`ExactLockName`), which PyMySQL returns as bytes,
    the texts are read as their UTF-8 bytes (`mysql_text`), and no column of the
    runs table holds anything but text in bytes.
    """
    names = [column[0] for column in cursor.description]  # psycopg's and PyMySQL's
    return [
        {name: _read(value) for name, value in zip(names, row, strict=True)}
        for row in cursor.fetchall()
    ]


def _read(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC)
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8")
    return value


def _wrapped(
    err: DBAPIModule.Error,
    driver_error: type[DBAPIModule.Error],
    engine: Engine,
    *,
    disconnected: bool = False,
) -> BaseException:
    return DBAPIError.instance(
        None,
        None,
        err,
        driver_error,
        connection_invalidated=disconnected,
        dialect=engine.dialect,
    )
