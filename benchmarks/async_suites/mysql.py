"""mysql: AsyncMySqlNamedLock against raw asyncmy sending the same SQL (and aiomysql).

asyncmy is the floor: it is the driver the adapter drives. aiomysql, the other
maintained asyncio MySQL driver, runs the same two statements as a reference when
it is installed (`--group bench`), which is how asyncmy was chosen. aiomysql has no
read timeout, so its row runs unbounded while asyncmy's (floor and adapter alike) pay
an `asyncio.wait_for` per packet for the lock's `read_timeout`: compare the drivers
with equal settings before drawing a conclusion from that row.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any

from async_locks import AsyncCase, AsyncCycle, lock_cycle, unique

MYSQL = os.environ.get("FIREFLY_TEST_MYSQL_URL", "mysql://root:root@127.0.0.1:3306/test")


def _raw_cycle(cursor: Any, server_name: str, driver: str) -> AsyncCycle:
    """GET_LOCK then RELEASE_LOCK on one reused cursor: the adapter's two round trips."""
    from firefly_scheduling_mysql import protocol as sql  # noqa: PLC0415

    async def cycle() -> None:
        await cursor.execute(sql.GET_LOCK, (server_name,))
        row = await cursor.fetchone()
        if row is None or row[0] != 1:
            raise RuntimeError(f"raw {driver} did not win")
        await cursor.execute(sql.RELEASE_LOCK, (server_name,))
        await cursor.fetchone()

    return cycle


async def cases(stack: AsyncExitStack) -> list[AsyncCase]:
    from asyncmy.connection import Connection  # noqa: PLC0415 - optional dependency

    from firefly_scheduling_mysql import AsyncMySqlNamedLock  # noqa: PLC0415
    from firefly_scheduling_mysql.url import (  # noqa: PLC0415
        asyncmy_arguments,
        connection_arguments,
    )

    lock = AsyncMySqlNamedLock(MYSQL)
    stack.push_async_callback(lock.aclose)
    arguments = asyncmy_arguments(connection_arguments(MYSQL))
    connection = Connection(**arguments, autocommit=True)  # type: ignore[no-untyped-call]
    await connection.connect()
    stack.callback(connection.close)
    found = [
        AsyncCase("mysql", "AsyncMySqlNamedLock", "adapter", lock_cycle(lock, unique("mysql"))),
        AsyncCase(
            "mysql",
            "raw asyncmy",
            "floor",
            _raw_cycle(connection.cursor(), unique("my-floor"), "asyncmy"),
        ),
    ]
    try:
        import aiomysql  # noqa: PLC0415 - measured only where installed
    except ImportError:
        return found
    pymysql_arguments = connection_arguments(MYSQL)
    reference = await aiomysql.connect(
        host=pymysql_arguments["host"],
        port=pymysql_arguments["port"],
        user=pymysql_arguments["user"],
        password=pymysql_arguments["password"],
        db=pymysql_arguments["database"],
        autocommit=True,
    )
    stack.callback(reference.close)
    cursor = await reference.cursor()
    found.append(
        AsyncCase(
            "mysql", "raw aiomysql", "reference", _raw_cycle(cursor, unique("ai"), "aiomysql")
        )
    )
    return found


def pair() -> tuple[Any, Any]:
    from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock  # noqa: PLC0415

    return (lambda: AsyncMySqlNamedLock(MYSQL)), (lambda: MySqlNamedLock(MYSQL))
