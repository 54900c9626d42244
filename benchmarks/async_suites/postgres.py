"""postgres: AsyncPgAdvisoryLock against raw psycopg AsyncConnection sending the same SQL."""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any

from async_locks import AsyncCase, lock_cycle, unique

POSTGRES = os.environ.get(
    "FIREFLY_TEST_POSTGRES_URL", "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
)


async def cases(stack: AsyncExitStack) -> list[AsyncCase]:
    import psycopg  # noqa: PLC0415 - optional benchmark dependency

    from firefly_scheduling_postgres import AsyncPgAdvisoryLock  # noqa: PLC0415
    from firefly_scheduling_postgres import protocol as sql  # noqa: PLC0415
    from firefly_scheduling_postgres.url import (  # noqa: PLC0415
        PostgresConnection,
    )

    lock = AsyncPgAdvisoryLock(POSTGRES)
    stack.push_async_callback(lock.aclose)
    connection = await psycopg.AsyncConnection.connect(
        PostgresConnection.parse(POSTGRES).conninfo, autocommit=True
    )
    stack.push_async_callback(connection.close)
    cursor = connection.cursor()  # one reused cursor, as the adapter keeps one
    key = sql.advisory_key(unique("pg-floor"))

    async def floor() -> None:
        """The adapter's two round trips, with no holding bookkeeping around them."""
        await cursor.execute(sql.TRY_LOCK, (key,))
        row = await cursor.fetchone()
        if row is None or not row[0]:
            raise RuntimeError("raw postgres did not win")
        await cursor.execute(sql.UNLOCK, (key,))
        await cursor.fetchone()

    return [
        AsyncCase("postgres", "AsyncPgAdvisoryLock", "adapter", lock_cycle(lock, unique("pg"))),
        AsyncCase("postgres", "raw psycopg AsyncConnection", "floor", floor),
    ]


def pair() -> tuple[Any, Any]:
    from firefly_scheduling_postgres import (  # noqa: PLC0415
        AsyncPgAdvisoryLock,
        PgAdvisoryLock,
    )

    return (lambda: AsyncPgAdvisoryLock(POSTGRES)), (lambda: PgAdvisoryLock(POSTGRES))
