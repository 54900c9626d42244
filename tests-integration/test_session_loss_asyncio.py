"""The asyncio session locks when their session dies, and when a statement merely fails.

`AsyncPgAdvisoryLock` and `AsyncMySqlNamedLock` tell a real disconnect from a
statement's error through their own driver (`_alive`): psycopg's `broken`, asyncmy's
stream. A disconnect (the server ends the lock's own session, found through the
lock it holds, never anyone else's) must mark the holding lost, let another node
win the name, and reconnect on the next call. A statement's error must fail that
call alone: every holding stays held, as a second session on the server sees.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from firefly_scheduling import LockBackendError
from firefly_scheduling.locks.session_async import AsyncSessionLock
from firefly_scheduling_mysql import AsyncMySqlNamedLock
from firefly_scheduling_postgres import AsyncPgAdvisoryLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from session_killers import Killer, mysql_killer, pg_killer


@pytest.fixture(params=["postgres", "mysql"])
def backend(
    request: pytest.FixtureRequest,
) -> tuple[Callable[[], AsyncSessionLock[Any]], Killer, str]:
    """A factory of async locks, a killer of the session holding a name, and a bad statement."""
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        return (lambda: AsyncPgAdvisoryLock(url)), pg_killer(url), "SELECT 1/0"
    url = request.getfixturevalue("mysql_url")
    return (lambda: AsyncMySqlNamedLock(url)), mysql_killer(url), "SELECT no_such_column"


async def wait_until_free(other: AsyncSessionLock[Any], name: str) -> None:
    """Until `other` wins `name`: the server frees a killed session's locks shortly after."""
    for _ in range(500):
        if await other.try_acquire(name, 30):
            await other.release(name)
            return
        await asyncio.sleep(0.02)
    pytest.fail(f"{name!r} stayed held after its session was killed")


def test_a_killed_session_loses_its_holdings_and_the_next_call_reconnects(
    backend: tuple[Callable[[], AsyncSessionLock[Any]], Killer, str],
) -> None:
    make, kill, _ = backend
    name = f"async-session-loss:{uuid.uuid4().hex}"

    async def scenario() -> None:
        lock, other = make(), make()
        try:
            assert await lock.try_acquire(name, 30)
            await asyncio.to_thread(kill, name)
            await wait_until_free(other, name)
            assert await lock.renew(name, 30) is False  # the disconnect is seen here
            assert lock.is_lost(name)
            await lock.release(name)  # forgets the lost holding, sends nothing
            assert await lock.try_acquire(name + ":next", 30), "no reconnect"
            assert await other.try_acquire(name + ":next", 30) is False
            await lock.release(name + ":next")
        finally:
            await lock.aclose()
            await other.aclose()

    asyncio.run(scenario())


def test_a_failed_statement_keeps_the_session_and_every_holding(
    backend: tuple[Callable[[], AsyncSessionLock[Any]], Killer, str],
) -> None:
    make, _, bad_statement = backend
    name = f"async-statement-error:{uuid.uuid4().hex}"

    async def scenario() -> None:
        lock, other = make(), make()
        try:
            assert await lock.try_acquire(name, 30)

            async def fail(connection: Any) -> None:
                # The adapter's own session, one statement the server refuses.
                if isinstance(connection, psycopg.AsyncCursor):
                    await connection.execute(bad_statement)
                else:
                    async with connection.cursor() as cursor:
                        await cursor.execute(bad_statement)

            session = lock._session_of(name)
            assert session is not None
            with pytest.raises(lock.driver_errors):
                await lock._run(session, fail)
            assert lock.is_held(name)
            assert not lock.is_lost(name)
            assert await other.try_acquire(name, 30) is False, "the session ended"
            assert await lock.renew(name, 30) is True
            await lock.release(name)
            assert await other.try_acquire(name, 30)
            await other.release(name)
        finally:
            await lock.aclose()
            await other.aclose()

    asyncio.run(scenario())


def test_backend_errors_surface_as_lock_backend_error() -> None:
    """An unreachable server is `LockBackendError` for the asyncio flavours too."""

    async def scenario() -> None:
        for lock in (
            AsyncPgAdvisoryLock("postgresql://app:pw@127.0.0.1:1/app"),
            AsyncMySqlNamedLock("mysql://app:pw@127.0.0.1:1/app"),
        ):
            with pytest.raises(LockBackendError):
                await lock.try_acquire("unreachable", 30)
            await lock.aclose()

    asyncio.run(scenario())
