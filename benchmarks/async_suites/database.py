"""database: AsyncDatabaseLeaseLock against its raw async driver and raw SQLAlchemy async.

For each dialect (SQLite file, PostgreSQL, MariaDB) one cycle is the lock's own
acquire upsert and owner-checked DELETE, in autocommit:

* adapter: `AsyncDatabaseLeaseLock(url)`, given the synchronous spelling of the URL
  (it maps it to aiosqlite, psycopg's async connection, asyncmy);
* floor: the raw async driver on one reused connection in autocommit, sending the
  adapter's own statements (read from the lock, private on purpose) in the driver's
  paramstyle, with no pool and no SQLAlchemy;
* baseline: raw SQLAlchemy asyncio, `AsyncConnection.execute(text(...))` of the same
  statements on one reused connection in autocommit (what a hand-written lock on
  SQLAlchemy's asyncio extension would cost).

The throughput pair is PostgreSQL's (`FIREFLY_BENCH_DATABASE=sqlite|mariadb` picks
another): 100 coroutines on one async lock (one pool) against 100 threads on one
synchronous lock.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import AsyncExitStack
from typing import Any

from async_locks import AsyncCase, lock_cycle, unique

POSTGRES = os.environ.get("FIREFLY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL = os.environ.get("FIREFLY_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
_SQLITE_DIR = tempfile.mkdtemp(prefix="firefly-bench-")


def _urls() -> dict[str, str]:
    return {
        "database/sqlite": f"sqlite:///{_SQLITE_DIR}/bench.sqlite3",
        "database/postgres": POSTGRES,
        "database/mariadb": MYSQL,
    }


async def cases(stack: AsyncExitStack) -> list[AsyncCase]:
    from firefly_scheduling_database import AsyncDatabaseLeaseLock  # noqa: PLC0415

    found: list[AsyncCase] = []
    for backend, url in _urls().items():
        lock = AsyncDatabaseLeaseLock(url)
        await lock.install()
        stack.push_async_callback(lock.aclose)
        found.append(
            AsyncCase(backend, "AsyncDatabaseLeaseLock", "adapter", lock_cycle(lock, unique("db")))
        )
        # The floor and the baseline each hold a connection for the whole run: they take
        # them from a second lock's engine (the same URL, so the same connect arguments),
        # as the measured lock's pool is bounded and must keep its own connections.
        source = AsyncDatabaseLeaseLock(url)
        stack.push_async_callback(source.aclose)
        found.append(await _driver_floor(stack, backend, source))
        found.append(await _sqlalchemy_baseline(stack, backend, source))
    return found


async def _driver_floor(stack: AsyncExitStack, backend: str, lock: Any) -> AsyncCase:
    """The async driver's own connection, in autocommit, sending the lock's statements."""
    sql = lock._sql  # private on purpose: the exact statements
    engine = lock._bind  # the lock's engine, only to open one connection the same way
    pooled = await engine.raw_connection()
    stack.callback(pooled.close)
    connection = pooled.driver_connection  # aiosqlite / psycopg AsyncConnection / asyncmy
    key = sql.key(unique("db-raw"))
    ttl = sql.ttl(30.0)
    acquire_sql, release_sql = sql.acquire.driver_sql, sql.release.driver_sql

    if backend == "database/mariadb":  # asyncmy: cursor() then execute

        async def run(statement: str, parameters: Any) -> int:
            cursor = connection.cursor()
            await cursor.execute(statement, parameters)
            count: int = cursor.rowcount
            await cursor.close()
            return count

    else:  # aiosqlite, psycopg: execute() makes and runs the cursor

        async def run(statement: str, parameters: Any) -> int:
            cursor = await connection.execute(statement, parameters)
            count: int = cursor.rowcount
            await cursor.close()
            return count

    async def floor() -> None:
        owner = os.urandom(16).hex()
        acquire = sql.acquire.driver_parameters({"name": key, "owner": owner, "ttl": ttl})
        if await run(acquire_sql, acquire) < 1:
            raise RuntimeError("raw upsert lost an uncontended name")
        await run(release_sql, sql.release.driver_parameters({"name": key, "owner": owner}))

    # The driver's own class: the engine may hand out a subclass of ours (psycopg's
    # connection with the reply deadline).
    driver = next(
        root
        for cls in type(connection).__mro__
        if not (root := cls.__module__.split(".")[0]).startswith("firefly_scheduling")
    )
    return AsyncCase(backend, f"raw {driver}: upsert + DELETE, autocommit", "floor", floor)


async def _sqlalchemy_baseline(stack: AsyncExitStack, backend: str, lock: Any) -> AsyncCase:
    """SQLAlchemy's asyncio layer running the same text() statements, in autocommit."""
    sql = lock._sql
    connection = await lock._bind.connect()
    stack.push_async_callback(connection.close)
    await connection.execution_options(isolation_level="AUTOCOMMIT")
    key = sql.key(unique("db-sa"))
    ttl = sql.ttl(30.0)

    async def baseline() -> None:
        owner = os.urandom(16).hex()
        result = await connection.execute(
            sql.acquire.clause, {"name": key, "owner": owner, "ttl": ttl}
        )
        if result.rowcount < 1:
            raise RuntimeError("SQLAlchemy upsert lost an uncontended name")
        await connection.execute(sql.release.clause, {"name": key, "owner": owner})

    return AsyncCase(backend, "SQLAlchemy asyncio: text() upsert + DELETE", "baseline", baseline)


def pair() -> tuple[Any, Any]:
    from firefly_scheduling_database import (  # noqa: PLC0415
        AsyncDatabaseLeaseLock,
        DatabaseLeaseLock,
    )

    url = _urls()[f"database/{os.environ.get('FIREFLY_BENCH_DATABASE', 'postgres')}"]
    DatabaseLeaseLock(url).install()
    return (lambda: AsyncDatabaseLeaseLock(url)), (lambda: DatabaseLeaseLock(url))
