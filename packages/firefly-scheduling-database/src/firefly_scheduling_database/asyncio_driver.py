"""One lease statement on an async driver's own connection, read back in full.

`AsyncDatabaseLeaseLock` built on a URL sends its statements straight to the async
driver's connection under SQLAlchemy's pooled one (`driver_connection`), as the
synchronous lock sends them to the DBAPI cursor: SQLAlchemy's asyncio layer would
add a greenlet switch and a result wrapper to every call. The async drivers do not
share one cursor API (aiosqlite and psycopg make and run a cursor in one call, asyncmy
in two; some fetch and close with a coroutine, some without), so this module is the
only place that knows their differences. It needs no SQLAlchemy and does no pooling.

The result is read in full before the cursor closes (`BufferedResult`): a lease
statement returns at most one row (a batch of acquisitions one per name won), and
SQLite keeps the write open until the statement behind the cursor is reset.

A MySQL text of several statements (a group of releases, `protocol.mysql`) answers
with a result per statement: `rowcounts` reads them one after another (asyncmy's
`nextset`, a coroutine), every one, so the connection is left with none unread. When
a statement fails, the server runs none after it and answers with that error alone:
asyncmy raises it from the `nextset` that reads it, and has nothing left to read.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from firefly_scheduling_database.protocol.statement import Statement


@dataclass(frozen=True)
class BufferedResult:
    """What the lock reads from a statement, kept after its cursor closed.

    Fits `protocol.statement.StatementResult`, like a DBAPI cursor.
    """

    rowcount: int
    lastrowid: Any
    rows: Sequence[Any]

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> Sequence[Any]:
        return self.rows


async def execute(
    connection: Any, statement: Statement, parameters: Mapping[str, object]
) -> BufferedResult:
    """Run `statement` on the async driver `connection`; its count, id and first row."""
    cursor = await _executed(connection, statement, parameters)
    try:
        rows = () if cursor.description is None else await _settled(cursor.fetchall())
        return BufferedResult(cursor.rowcount, getattr(cursor, "lastrowid", None), tuple(rows))
    finally:
        await _settled(cursor.close())


async def rowcounts(
    connection: Any, statement: Statement, parameters: Mapping[str, object]
) -> list[int]:
    """Run the multi-statement text `statement`; each statement's affected-row count.

    Every result is read, so none is left on the connection; a statement that failed
    raises its error from the read of its result (the server ran none after it).
    """
    cursor = await _executed(connection, statement, parameters)
    try:
        counts = [int(cursor.rowcount)]
        while await _settled(cursor.nextset()):
            counts.append(int(cursor.rowcount))
        return counts
    finally:
        await _settled(cursor.close())


async def _executed(connection: Any, statement: Statement, parameters: Mapping[str, object]) -> Any:
    """A cursor of `connection` that ran `statement`, its first result read."""
    arguments = statement.driver_parameters(parameters)
    run = getattr(connection, "execute", None)
    if run is not None:  # aiosqlite, psycopg: one call makes the cursor and runs it
        return await run(statement.driver_sql, arguments)
    cursor = connection.cursor()  # asyncmy: made, then run
    await cursor.execute(statement.driver_sql, arguments)
    return cursor


async def _settled(value: Any) -> Any:
    """`value`, awaited if the driver returned an awaitable (fetch and close differ)."""
    return await value if inspect.isawaitable(value) else value
