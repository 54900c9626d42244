# Generated from driver_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The MySQL lock's calls on its driver: asyncmy for asyncio, PyMySQL generated from it.

What differs between the two drivers is kept here, apart from the lock's rules
(`lock_async`): making a connection that has not connected yet (so a failed connect
leaves an object to ask whether the server greeted), telling whether a connection
survived a failed statement, reading a cursor's row count, and the one-row reads
and multi-statement results every lock statement is read through. A statement whose
table is missing creates it and runs again (`execute_creating`).

Written once, for asyncio, in `driver_async.py`; `driver.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

from pymysql.connections import Connection as PyMySqlConnection
from pymysql.constants import CLIENT
from pymysql.cursors import Cursor
from pymysql.err import InterfaceError, MySQLError, OperationalError

from firefly_scheduling_mysql import protocol as sql

# PyMySQL's Connection is generic only in its stubs, hence the string.
Connection: TypeAlias = "PyMySqlConnection[Cursor]"

__all__ = [
    "Connection",
    "Cursor",
    "InterfaceError",
    "MySQLError",
    "OperationalError",
    "affected_rows",
    "connection_alive",
    "execute_creating",
    "greeted",
    "next_result",
    "one_row",
    "row_answers",
    "scalar",
    "server_text",
    "unconnected",
]


def unconnected(arguments: dict[str, Any]) -> Connection:
    """A connection that has not connected yet (`connect()` does), so a failed
    connect leaves an object to ask whether the server greeted."""
    return PyMySqlConnection(
        **arguments,
        autocommit=True,
        defer_connect=True,
        client_flag=CLIENT.MULTI_STATEMENTS,
    )


def connection_alive(connection: Connection) -> bool:
    """Whether `connection` survived a failed statement.

    PyMySQL closes its socket on a lost connection, never on a statement's error.
    """
    return bool(connection.open)


def affected_rows(cursor: Cursor) -> int:
    """The affected or returned rows."""
    return cursor.rowcount


def execute_creating(cursor: Cursor, create: str, statement: str, parameters: object) -> None:
    """Run `statement`; when its table is missing, create it (`create`) and run it again.

    A missing table is reported when the statement opens its tables, before it runs
    anything (GET_LOCK included), so running it again is safe; racing creators are
    harmless (`IF NOT EXISTS`).
    """
    try:
        cursor.execute(statement, parameters)
    except MySQLError as err:
        if not err.args or err.args[0] != sql.NO_SUCH_TABLE:
            raise
        cursor.execute(create)
        cursor.execute(statement, parameters)


def greeted(connection: Connection) -> bool:
    """Whether a MySQL greeting (protocol version 10) was read; the driver keeps its fields."""
    return getattr(connection, "protocol_version", None) == sql.PROTOCOL_VERSION


def one_row(connection: Connection, statement: str, parameters: Sequence[str]) -> Any:
    """The one row `statement` returns."""
    with connection.cursor() as cursor:
        cursor.execute(statement, parameters)
        row = cursor.fetchone()
    if row is None:
        raise InterfaceError("the server returned no row for a single-row query")
    return row


def row_answers(connection: Connection, statement: str, servers: Sequence[str]) -> list[bool]:
    """The answers of `statement` (`sql.answers_in_one_column`) for `servers`, in order."""
    answers = sql.answers((one_row(connection, statement, servers))[0])
    if len(answers) != len(servers):
        raise InterfaceError(f"{len(servers)} lock names asked, {len(answers)} answered")
    return answers


def server_text(value: object) -> str:
    """A VARBINARY column's value (bytes) as the server name it holds."""
    return bytes(value).decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)


def next_result(cursor: Cursor) -> None:
    """Move to the next result of a multi-statement text, which must have one."""
    if not cursor.nextset():
        raise InterfaceError("the server answered fewer statements than were sent")


def scalar(connection: Connection, statement: str, *args: Any) -> Any:
    """The first column of the one row `statement` returns."""
    with connection.cursor() as cursor:
        cursor.execute(statement, args or None)
        row = cursor.fetchone()
    if row is None:
        raise InterfaceError("the server returned no row for a single-row query")
    return row[0]
