"""AsyncDatabaseLeaseLock on real PostgreSQL and MariaDB: bounded waits, faults, your objects.

The contract suite proves the port; these cases prove what only the asyncio flavour
can get wrong: a statement interrupted by a cancellation must not hand a half-used
connection back to the pool, a connection the server killed must be replaced, and
an application's own `AsyncEngine` / `AsyncConnection` must behave as the
synchronous lock's `Engine` / `Connection` do. Fault cases only kill their own
connections, and every table is private to its case.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import QueuePool

from firefly_scheduling import LockBackendError
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_database.engine import async_lock_engine, lock_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_tables import installed_lease_table
from session_killers import KillableServer

SERVERS = ["postgres_url", "mysql_url"]


@pytest.fixture(params=SERVERS)
def server_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(request.param)
    return url


@pytest.fixture
def lease_table(server_url: str) -> Iterator[str]:
    with installed_lease_table(server_url, "ff_aio") as table:
        yield table


def test_a_row_held_by_an_open_transaction_is_refused_within_the_lock_timeout(
    server_url: str, lease_table: str
) -> None:
    blocker_engine = lock_engine(server_url)
    with blocker_engine.connect() as blocker:
        blocker.execute(sql("SELECT 1"))  # an open transaction that will hold the row
        assert DatabaseLeaseLock(blocker, table=lease_table).try_acquire("report", 30)

        async def contend() -> tuple[bool, float]:
            lock = AsyncDatabaseLeaseLock(server_url, table=lease_table)
            started = time.monotonic()
            won = await lock.try_acquire("report", 30)
            elapsed = time.monotonic() - started
            await lock.aclose()
            return won, elapsed

        won, elapsed = asyncio.run(contend())
        assert won is False
        assert elapsed < 10, "try_acquire must not wait for the holder"
        blocker.rollback()
    blocker_engine.dispose()


def test_a_cancelled_acquisition_discards_its_connection_and_the_next_call_works(
    server_url: str, lease_table: str
) -> None:
    """Cancelled mid-statement (waiting on a row lock), the connection must not be reused.

    The driver's protocol state is unknown after the cancellation (psycopg: a command
    still in progress; asyncmy: an unread reply). The next call, on the same lock and
    its one-connection pool, must succeed at once. The statement may still complete on
    the server (MariaDB runs it once the row is free; psycopg cancels it server-side),
    and then its lease, whose owner nobody holds, ends with its TTL like a crashed
    node's: never later.
    """
    blocker_engine = lock_engine(server_url)

    async def scenario() -> None:
        lock = AsyncDatabaseLeaseLock(server_url, table=lease_table)
        engine: AsyncEngine = lock._bind  # type: ignore[assignment] # the lock's own pool
        assert await lock.try_acquire("warm-up", 30)  # one pooled connection now exists
        await lock.release("warm-up")
        with blocker_engine.connect() as blocker:
            blocker.execute(sql("SELECT 1"))
            assert DatabaseLeaseLock(blocker, table=lease_table).try_acquire("report", 30)
            waiting = asyncio.ensure_future(lock.try_acquire("report", 1.0))
            await asyncio.sleep(0.5)  # now blocked on the row lock inside the statement
            assert not waiting.done(), "the acquisition should be waiting on the row lock"
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            blocker.rollback()
        pool = engine.sync_engine.pool
        assert isinstance(pool, QueuePool)
        assert pool.checkedout() == 0, "the connection went back or away"
        released = time.monotonic()
        assert await lock.try_acquire("after", 30), "the next call must work at once"
        assert time.monotonic() - released < 2
        while not await lock.try_acquire("report", 30):
            assert time.monotonic() - released < 1.0 + 2.0, "an orphan outlived its TTL"
            await asyncio.sleep(0.1)
        await lock.aclose()

    asyncio.run(scenario())
    blocker_engine.dispose()


@pytest.mark.parametrize("built_from", ["url", "engine"])
def test_a_killed_connection_raises_once_then_the_next_call_reconnects(
    killable_server: KillableServer, built_from: str
) -> None:
    url = killable_server.url

    async def scenario(table: str) -> None:
        if built_from == "url":  # statements go straight to the async driver's connection
            lock = AsyncDatabaseLeaseLock(url, table=table)
            engine: AsyncEngine = lock._bind  # type: ignore[assignment] # the pool, for the kill
        else:  # statements go through SQLAlchemy's asyncio execution layer
            engine = async_lock_engine(url)
            lock = AsyncDatabaseLeaseLock(engine, table=table)
        assert await lock.try_acquire("before", 30)
        async with engine.connect() as pooled:  # the pool's only connection: the lock's own
            victim = int((await pooled.execute(sql(killable_server.whoami))).scalar_one())
        killable_server.end(victim)
        with pytest.raises(LockBackendError, match="database lock backend"):
            await lock.try_acquire("during", 30)
        assert await lock.try_acquire("after", 30), "the next call must reconnect"
        await lock.release("after")
        await lock.release("before")
        await lock.aclose()
        await engine.dispose()

    with installed_lease_table(url, "ff_aio") as table:
        asyncio.run(scenario(table))


def test_mariadb_async_engine_with_sqlalchemys_found_rows_still_tells_won_from_held(
    mysql_url: str,
) -> None:
    """SQLAlchemy's own asyncmy engines count found rows: the lock reads the row back."""
    table = f"ff_aio_{uuid.uuid4().hex[:12]}"

    async def scenario() -> None:
        engine = create_async_engine(mysql_url.replace("mysql://", "mysql+asyncmy://", 1))
        async with engine.connect() as connection:
            raw = await connection.get_raw_connection()
            assert raw.driver_connection._client_flag & 2, "found rows are counted here"  # type: ignore[union-attr]
        first = AsyncDatabaseLeaseLock(engine, table=table)
        second = AsyncDatabaseLeaseLock(engine, table=table)
        await first.install()
        assert await first.try_acquire("report", 0.3)
        assert await second.try_acquire("report", 30) is False  # rowcount 1, yet not won
        await asyncio.sleep(0.4)
        assert await second.try_acquire("report", 30)
        await first.release("report")
        assert await first.try_acquire("report", 30) is False
        await second.release("report")
        assert await first.try_acquire_fenced("report", 30) == 1
        await first.release("report")
        async with engine.begin() as connection:
            for created in first.tables.all:
                await connection.run_sync(created.drop)
        await engine.dispose()

    asyncio.run(scenario())


def test_postgres_lease_in_your_transaction_commits_or_rolls_back_with_it(
    postgres_url: str,
) -> None:
    """An AsyncConnection inside a transaction: savepoints; a refusal keeps it usable."""
    table = f"ff_aio_{uuid.uuid4().hex[:12]}"
    installer = DatabaseLeaseLock(postgres_url, table=table)
    installer.install()
    outsider = DatabaseLeaseLock(postgres_url, table=table)
    assert outsider.try_acquire("taken", 30)

    async def scenario() -> None:
        engine = async_lock_engine(postgres_url)
        async with engine.connect() as connection:
            await connection.begin()
            lock = AsyncDatabaseLeaseLock(connection, table=table)
            assert await lock.try_acquire("rolled-back", 30)
            assert await lock.try_acquire("taken", 30) is False
            # The refused statement rolled back to its savepoint only: still usable.
            assert (await connection.execute(sql("SELECT 1"))).scalar_one() == 1
            assert installer.try_acquire("rolled-back", 30) is False, "not committed: waits"
            await connection.rollback()
            assert installer.try_acquire("rolled-back", 30), "rolled back with the caller"
            installer.release("rolled-back")
            await connection.begin()
            assert await lock.try_acquire("committed", 30)
            await connection.commit()
        assert installer.try_acquire("committed", 30) is False, "committed with the caller"
        await engine.dispose()

    asyncio.run(scenario())
    outsider.release("taken")
    outsider.close()
    engine = lock_engine(postgres_url)
    for created in installer.tables.all:
        created.drop(engine)
    engine.dispose()
    installer.close()


def test_connections_beyond_the_pool_size_are_closed_on_the_server(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """50 coroutines on one lock overflow its pool (5 + 10); the overflow is closed for real.

    Returning an overflow connection makes the pool close it, which waits on the async
    driver: done outside SQLAlchemy's greenlet it fails, is only logged, and leaves the
    session open on the server. The server's own list of sessions is the witness.
    """
    table = f"ff_aio_{uuid.uuid4().hex[:12]}"
    installer = DatabaseLeaseLock(postgres_url, table=table)
    installer.install()
    tag = f"ff-aio-{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{separator}application_name={tag}"
    watcher = lock_engine(postgres_url)
    count = sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = :tag")

    async def scenario() -> int:
        lock = AsyncDatabaseLeaseLock(url, table=table)

        async def worker(index: int) -> None:
            for round_ in range(5):
                name = f"overflow:{index}:{round_}"
                assert await lock.try_acquire(name, 30)
                await lock.release(name)

        await asyncio.gather(*(worker(index) for index in range(50)))
        with watcher.connect() as connection:
            open_sessions = int(connection.scalar(count, {"tag": tag}))
        await lock.aclose()
        return open_sessions

    caplog.set_level(logging.ERROR, logger="sqlalchemy.pool")
    open_sessions = asyncio.run(scenario())
    assert open_sessions <= 5, "only the pool's own connections may stay open between calls"
    assert not [r for r in caplog.records if "closing connection" in r.getMessage()]
    deadline = time.monotonic() + 5
    # One transaction per reading: PostgreSQL keeps a transaction's first view of
    # pg_stat_activity, so polling inside one would never see the sessions leave.
    while True:
        with watcher.connect() as connection:
            if int(connection.scalar(count, {"tag": tag})) == 0:
                break
        assert time.monotonic() < deadline, "aclose() left sessions open on the server"
        time.sleep(0.05)
    for created in installer.tables.all:
        created.drop(watcher)
    watcher.dispose()
    installer.close()
