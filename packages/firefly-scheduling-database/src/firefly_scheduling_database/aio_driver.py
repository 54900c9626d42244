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
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from firefly_scheduling_database.dialects import Statement


@dataclass(frozen=True)
class BufferedResult:
    """What the lock reads from a statement, kept after its cursor closed.

    Fits `dialects.StatementResult`, like a DBAPI cursor.
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
    arguments = statement.driver_parameters(parameters)
    run = getattr(connection, "execute", None)
    if run is not None:  # aiosqlite, psycopg: one call makes the cursor and runs it
        cursor = await run(statement.driver_sql, arguments)
    else:  # asyncmy
        cursor = connection.cursor()
        await cursor.execute(statement.driver_sql, arguments)
    try:
        rows = () if cursor.description is None else await _settled(cursor.fetchall())
        return BufferedResult(cursor.rowcount, getattr(cursor, "lastrowid", None), tuple(rows))
    finally:
        await _settled(cursor.close())


async def _settled(value: Any) -> Any:
    """`value`, awaited if the driver returned an awaitable (fetch and close differ)."""
    return await value if inspect.isawaitable(value) else value
