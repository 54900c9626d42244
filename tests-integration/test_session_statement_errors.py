"""Session backends isolate a failing statement: only a disconnect ends the session.

Any driver error used to close the shared session, so one fenced acquire
that hit a statement timeout (or PostgreSQL's full lock table) freed every lock the
node held, and another node took a running task's lock. Each case here makes ONE
statement fail while the session stays connected, and proves from a second session
that every other lock is still held and that the failed acquisition left no server
lock behind. The asyncio locks tell a disconnect from a statement's error through
their own driver (`_alive`: psycopg's `broken`, asyncmy's stream); a statement the
server refuses on their session must fail that call alone too.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pymysql
import pytest

from firefly_scheduling import LockBackendError
from firefly_scheduling.locks.session_async import AsyncSessionLock
from firefly_scheduling.testing.local_server import LocalServer, running_as_root
from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock
from firefly_scheduling_postgres.protocol import FENCE_TABLE as PG_FENCES

pytestmark = pytest.mark.slow


@pytest.fixture
def name() -> str:
    return f"statement-errors:{uuid.uuid4().hex}"


def with_statement_timeout(url: str, milliseconds: int) -> str:
    """`url` whose sessions get `statement_timeout` (libpq `options`)."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options={quote(f'-c statement_timeout={milliseconds}')}"


def _only_the_failed_acquisition_failed(
    lock: PgAdvisoryLock | MySqlNamedLock,
    other: PgAdvisoryLock | MySqlNamedLock,
    held: str,
    blocked: str,
) -> None:
    """After `blocked`'s acquisition failed: `held` is still held, `blocked` left nothing."""
    assert not lock.is_lost(held), "one failed statement marked another holding lost"
    assert other.try_acquire(held, 30) is False, "one failed statement freed another lock"
    assert lock.renew(held, 30) is True
    assert other.try_acquire(blocked, 30), "the failed acquisition's server lock leaked"
    other.release(blocked)


def test_postgres_a_statement_timeout_fails_that_acquire_alone(
    postgres_url: str, name: str
) -> None:
    lock = PgAdvisoryLock(with_statement_timeout(postgres_url, 300))
    other = PgAdvisoryLock(postgres_url)
    held, blocked = name + ":held", name + ":blocked"
    assert lock.try_acquire_fenced(held, 30) is not None  # creates the fence table too
    with psycopg.connect(postgres_url, connect_timeout=5) as blocker:
        # An open transaction holds the fence row of `blocked`: the fenced acquire takes
        # the advisory lock, then waits on that row until its statement times out.
        blocker.execute(
            f"INSERT INTO {PG_FENCES} (name, value) VALUES (%s, 1)"
            " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
            (blocked,),
        )
        with pytest.raises(LockBackendError, match="statement timeout"):
            lock.try_acquire_fenced(blocked, 30)
        blocker.rollback()
    _only_the_failed_acquisition_failed(lock, other, held, blocked)
    assert lock.try_acquire_fenced(blocked, 30) is not None, "and the session still works"
    lock.close()
    assert other.try_acquire(held, 30)
    assert other.try_acquire(blocked, 30)
    other.close()


def test_mysql_a_lock_wait_timeout_fails_that_acquire_alone(mysql_url: str, name: str) -> None:
    lock, other = MySqlNamedLock(mysql_url), MySqlNamedLock(mysql_url)
    held, blocked = name + ":held", name + ":blocked"
    assert lock.try_acquire_fenced(held, 30) is not None  # creates the fence table too
    session = lock._connection_of(held)  # white box: shorten this session's row-lock wait
    assert session is not None
    with session.cursor() as cursor:
        cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
    blocker = pymysql.connect(**connection_arguments(mysql_url), autocommit=False)
    try:
        with blocker.cursor() as cursor:
            cursor.execute(
                "INSERT INTO firefly_scheduling_fences (name, value) VALUES (%s, 1)"
                " ON DUPLICATE KEY UPDATE value = value",
                (MySqlNamedLock.server_name(blocked),),
            )
        with pytest.raises(LockBackendError, match="Lock wait timeout"):
            lock.try_acquire_fenced(blocked, 30)
    finally:
        blocker.rollback()
        blocker.close()
    _only_the_failed_acquisition_failed(lock, other, held, blocked)
    lock.close()
    assert other.try_acquire(held, 30)
    other.close()


# -- PostgreSQL's lock table full, on a private server with a tiny one ---------------


@pytest.fixture
def tiny_lock_table_postgres() -> Iterator[str]:
    """A private PostgreSQL whose shared lock table has room for about 50 locks.

    `max_locks_per_transaction * max_connections` slots: 10 * 5. Never the shared
    server, whose lock table other tests use.
    """
    binaries = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    if not binaries or not running_as_root() or shutil.which("setpriv") is None:
        pytest.skip("needs PostgreSQL's server binaries, root and setpriv for a private server")
    bin_dir = binaries[-1]
    data = Path(tempfile.mkdtemp(prefix="firefly-tiny-pg-"))
    as_postgres = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
    try:
        shutil.chown(data, "postgres", "postgres")
        subprocess.run(
            [
                *as_postgres,
                str(bin_dir / "initdb"),
                *("-D", str(data / "db"), "-A", "trust", "-U", "postgres", "--no-sync"),
            ],
            check=True,
            capture_output=True,
            env={**os.environ, "LC_ALL": "C"},
        )
        server = LocalServer(
            lambda port: [
                *as_postgres,
                str(bin_dir / "postgres"),
                "-D",
                str(data / "db"),
                "-p",
                str(port),
                "-k",
                str(data),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "max_connections=5",
                "-c",
                "max_locks_per_transaction=10",
                "-c",
                "fsync=off",
            ]
        )
        with server:
            url = f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
            _wait_until_accepting(url)
            yield url
    finally:
        shutil.rmtree(data, ignore_errors=True)


def _wait_until_accepting(url: str) -> None:
    """The port opens before recovery ends ("the database system is starting up")."""
    deadline = time.monotonic() + 30
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
        else:
            return


def test_postgres_a_full_lock_table_fails_that_acquire_alone(
    tiny_lock_table_postgres: str, name: str
) -> None:
    lock, other = PgAdvisoryLock(tiny_lock_table_postgres), PgAdvisoryLock(tiny_lock_table_postgres)
    running = name + ":running-task"
    assert lock.try_acquire(running, 30)
    taken: list[str] = []
    refusal: LockBackendError | None = None
    for index in range(1000):  # far more than the table holds
        try:
            assert lock.try_acquire(f"{name}:{index}", 30)
        except LockBackendError as err:
            refusal = err
            break
        taken.append(f"{name}:{index}")
    assert refusal is not None, "the lock table never filled"
    assert "out of shared memory" in str(refusal)
    assert taken, "the table filled before the first extra lock"
    assert not lock.is_lost(running), "a full lock table marked the running task's lock lost"
    for extra in taken:
        lock.release(extra)
    assert other.try_acquire(running, 30) is False, "a full lock table freed a running task"
    assert lock.renew(running, 30) is True
    lock.close()
    assert other.try_acquire(running, 30)
    other.close()


@pytest.fixture(params=["postgres", "mysql"])
def async_backend(
    request: pytest.FixtureRequest,
) -> tuple[Callable[[], AsyncSessionLock[Any]], str]:
    """A factory of asyncio session locks, and a statement the server refuses."""
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        return (lambda: AsyncPgAdvisoryLock(url)), "SELECT 1/0"
    url = request.getfixturevalue("mysql_url")
    return (lambda: AsyncMySqlNamedLock(url)), "SELECT no_such_column"


def test_asyncio_a_failed_statement_keeps_the_session_and_every_holding(
    async_backend: tuple[Callable[[], AsyncSessionLock[Any]], str], name: str
) -> None:
    make, bad_statement = async_backend

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
