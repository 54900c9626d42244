"""How many connections one node opens to a SQL server: counted by the server itself.

The node here is what a host builds from one URL: the lock, the run history and the
anchor store. 64 threads hammer all three at once (claims, acquisitions, keep-alive
checks, releases, history writes, anchors) while a second client counts the node's
sessions on the server: `pg_stat_activity` by a unique `application_name`, or
MariaDB's `information_schema.processlist` by a database of the test's own.

Also here: a busy pool makes callers wait and then fail naming the pool size, never
open more; and the end of one pooled session loses only the holdings on it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pymysql
import pytest
from sqlalchemy import Engine

from firefly_scheduling import LockBackendError
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.port import RunState
from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.locks.session import SessionLock
from firefly_scheduling.locks.session_async import AsyncSessionLock
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.anchor_store import DatabaseAnchorStore
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from session_killers import mysql_killer, pg_killer
from threads_together import run_together

THREADS = 64
ROUNDS = 5


@dataclass(frozen=True)
class Server:
    """A URL for the node, and a second client that counts the node's sessions."""

    url: str
    count: Callable[[], int]


def _with_query(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.fixture
def postgres_server(postgres_url: str) -> Iterator[Server]:
    application = f"firefly-bounds-{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True, connect_timeout=5) as admin:

        def count() -> int:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (application,),
            ).fetchone()
            assert row is not None
            return int(row[0])

        yield Server(_with_query(postgres_url, f"application_name={application}"), count)


@pytest.fixture
def mysql_server(mysql_url: str, mysql_database_url: str) -> Iterator[Server]:
    database = urlsplit(mysql_database_url).path.lstrip("/")
    # Connected to the shared database, so that it never counts itself.
    admin = pymysql.connect(**connection_arguments(mysql_url), autocommit=True)

    def count() -> int:
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.processlist WHERE db = %s", (database,)
            )
            row = cursor.fetchone()
        assert row is not None
        return int(row[0])

    try:
        yield Server(mysql_database_url, count)
    finally:
        admin.close()


@pytest.fixture(params=["postgres", "mysql"])
def server(request: pytest.FixtureRequest) -> Server:
    found: Server = request.getfixturevalue(f"{request.param}_server")
    return found


def _session_lock(url: str, **options: Any) -> SessionLock[Any]:
    if url.startswith("postgresql"):
        return PgAdvisoryLock(url, **options)
    return MySqlNamedLock(url, **options)


class Peak:
    """The most sessions the server showed while `watching`, sampled every 10 ms."""

    def __init__(self, count: Callable[[], int]) -> None:
        self._count = count
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.01):
            self.most = max(self.most, self._count())

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.most = max(self.most, self._count())


def _peak_under_hammer(server: Server, work: Callable[[int, int], None]) -> int:
    """The most sessions `server` showed while `work(thread, round)` ran on `THREADS`
    threads at once; the first failure of any thread is raised here."""

    def run(thread: int) -> None:
        for each in range(ROUNDS):
            work(thread, each)

    with Peak(server.count) as peak:
        failures = run_together(run, range(THREADS))
    if failures:
        raise failures[0]
    return peak.most


def _lock_work(lock: BaseLock, prefix: str) -> Callable[[int, int], None]:
    def work(thread: int, each: int) -> None:
        name = f"{prefix}:{thread}:{each}"
        lock.try_claim(name + ":claim", 30)
        holding = lock.acquire(name, 30, fenced=True)
        assert holding is not None
        assert lock.renew_holding(holding, 30)
        lock.release_holding(holding)

    return work


def _node_work(
    lock: BaseLock, history: SqlRunHistory, anchors: DatabaseAnchorStore, prefix: str
) -> Callable[[int, int], None]:
    locking = _lock_work(lock, prefix)

    def work(thread: int, each: int) -> None:
        locking(thread, each)
        task, now = f"{prefix}:{thread}", datetime.now(UTC)
        instant = now.replace(microsecond=each)
        history.start(task, instant, lock=task, node="bounds", token=None, at=now)
        history.finish(
            task, instant, lock=task, token=None, state=RunState.SUCCEEDED, error=None, at=now
        )
        if each % 5 == 0:
            anchors.add(f"{task}:{each}", "anchor")

    return work


def test_a_session_lock_under_64_threads_opens_its_share_and_no_more(server: Server) -> None:
    lock = _session_lock(server.url)
    assert lock.pool_size == 2, "half of the default budget of 4"
    try:
        most = _peak_under_hammer(server, _lock_work(lock, f"bounds:{uuid.uuid4().hex}"))
    finally:
        lock.close()
    assert most == 2, f"the lock's pool is 2 sessions, the server saw {most}"


def _node_peak(lock: BaseLock, server: Server) -> int:
    """The most connections the server saw while 64 threads used a whole node's parts."""
    history = SqlRunHistory(server.url)
    anchors = DatabaseAnchorStore(server.url)
    history.install()
    try:
        return _peak_under_hammer(
            server, _node_work(lock, history, anchors, f"bounds:{uuid.uuid4().hex}")
        )
    finally:
        lock.close()
        history.close()
        anchors.close()


def test_a_whole_node_under_64_threads_stays_within_the_default_budget(server: Server) -> None:
    """Lock, run history and anchor store from one URL: at most 4 connections together."""
    most = _node_peak(_session_lock(server.url), server)
    assert 2 < most <= 4, f"the node's budget is 4, the server saw {most}"


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_the_database_lock_with_its_stores_stays_within_the_budget(
    request: pytest.FixtureRequest, kind: str
) -> None:
    server: Server = request.getfixturevalue(f"{kind}_server")
    lock = DatabaseLeaseLock(server.url)
    lock.install()
    most = _node_peak(lock, server)
    assert 2 < most <= 4, f"the node's budget is 4, the server saw {most}"


def test_max_connections_in_the_url_sets_the_budget(server: Server) -> None:
    lock = _session_lock(_with_query(server.url, "max_connections=6"))
    assert lock.pool_size == 3
    try:
        most = _peak_under_hammer(server, _lock_work(lock, f"bounds:{uuid.uuid4().hex}"))
    finally:
        lock.close()
    assert most == 3, f"a budget of 6 gives the lock 3 sessions; the server saw {most}"


def test_the_stores_share_one_engine_and_hand_it_back(postgres_server: Server) -> None:
    history = SqlRunHistory(postgres_server.url)
    anchors = DatabaseAnchorStore(postgres_server.url)
    try:
        assert history.engine is anchors._engine, "two engines would double the stores' share"
        assert history.engine.pool.size() == 2  # type: ignore[attr-defined]
    finally:
        history.close()
    history.close()  # a second close must not take the anchor store's engine away
    assert anchors.now() > 0
    assert postgres_server.count() == 1
    anchors.close()
    assert _settled(postgres_server.count, 0) == 0


def _settled(count: Callable[[], int], expected: int, *, seconds: float = 5.0) -> int:
    """`count()` once it reads `expected`, or its last reading after `seconds`.

    A backend whose client closed its socket leaves `pg_stat_activity` when its
    process exits, a few milliseconds later on a loaded server: CI once read 1 there.
    """
    deadline = time.monotonic() + seconds
    while (seen := count()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return seen


@pytest.mark.parametrize(
    ("url_value", "argument", "message"),
    [
        ("1", None, r"at least 2 .* got '1' from the URL's max_connections query parameter"),
        ("many", None, r"got 'many' from the URL's max_connections query parameter"),
        (None, 0, r"got 0 from the max_connections argument"),
        ("4", 6, r"max_connections is 6 by argument but 4 in the URL"),
    ],
)
@pytest.mark.parametrize(
    "build", [PgAdvisoryLock, MySqlNamedLock, DatabaseLeaseLock, SqlRunHistory]
)
def test_a_bad_budget_is_refused_at_construction_naming_its_source(
    build: Callable[..., object], url_value: str | None, argument: int | None, message: str
) -> None:
    scheme = "postgresql" if build is PgAdvisoryLock else "mysql"
    url = f"{scheme}://app:S3cret@127.0.0.1:1/app"
    if url_value is not None:
        url += f"?max_connections={url_value}"
    with pytest.raises(ConfigurationError, match=message) as caught:
        build(url, max_connections=argument)
    assert "S3cret" not in str(caught.value)


def test_a_busy_pool_makes_callers_wait_then_fail_naming_its_size(server: Server) -> None:
    lock = _session_lock(server.url)
    lock.pool_timeout_seconds = 0.3  # type: ignore[misc]  # shortened for this test
    assert lock.try_claim(f"bounds:{uuid.uuid4().hex}", 30)
    sessions = lock._sessions
    for session in sessions:  # white box: every session busy with a statement
        session.mutex.acquire()
    try:
        started = time.monotonic()
        with pytest.raises(LockBackendError, match=r"pool_size=2"):
            lock.try_claim(f"bounds:{uuid.uuid4().hex}", 30)
        assert time.monotonic() - started >= 0.3, "it did not wait for a session"
        assert server.count() <= 2, "a busy pool opened another connection"
    finally:
        for session in sessions:
            session.mutex.release()
        lock.close()


def test_a_busy_database_pool_makes_callers_wait_then_fail_naming_its_size(
    postgres_server: Server,
) -> None:
    lock = DatabaseLeaseLock(postgres_server.url)
    lock.install()
    engine = lock._bind
    assert isinstance(engine, Engine)
    engine.pool._timeout = 0.3  # type: ignore[attr-defined]  # white box: shortened
    taken = [engine.raw_connection() for _ in range(2)]  # the lock's whole share
    try:
        with pytest.raises(LockBackendError, match=r"limit of size 2 overflow 0"):
            lock.try_acquire(f"bounds:{uuid.uuid4().hex}", 30)
        assert postgres_server.count() == 2, "a busy pool opened another connection"
    finally:
        for connection in taken:
            connection.close()
        lock.close()


# -- the end of one pooled session ----------------------------------------------------


def _end_session_of(
    lock: SessionLock[Any] | AsyncSessionLock[Any], name: str, server_url: str
) -> None:
    """End the server session holding `name` from a second client, as a failover would."""
    postgres = isinstance(lock, PgAdvisoryLock | AsyncPgAdvisoryLock)
    (pg_killer if postgres else mysql_killer)(server_url)(name)


def test_the_end_of_one_pooled_session_loses_only_its_holdings(server: Server) -> None:
    lock, other = _session_lock(server.url), _session_lock(server.url)
    prefix = f"bounds-loss:{uuid.uuid4().hex}"
    first, second, beside = prefix + ":first", prefix + ":second", prefix + ":beside"
    try:
        assert lock.try_acquire(first, 30)
        assert lock.try_acquire(beside, 30)
        # White box: with the first session busy, the next acquisition takes the second.
        busy = lock._sessions[0]
        busy.mutex.acquire()
        try:
            assert lock.try_acquire(second, 30)
        finally:
            busy.mutex.release()
        assert lock._session_of(first) is busy
        assert lock._session_of(beside) is busy
        assert lock._session_of(second) is lock._sessions[1]

        _end_session_of(lock, second, server.url)
        deadline = time.monotonic() + 10
        while not other.try_acquire(second, 30):
            assert time.monotonic() < deadline, "the ended session kept its lock"
            time.sleep(0.02)

        assert lock.renew(second, 30) is False, "the end of its session is seen here"
        assert lock.is_lost(second)
        for kept in (first, beside):
            assert lock.renew(kept, 30) is True, f"{kept!r} was on the other session"
            assert not lock.is_lost(kept)
            assert other.try_acquire(kept, 30) is False, f"{kept!r} was freed"
        lock.release(second)  # forgotten without a round trip
        assert other.try_acquire(second, 30) is False, "the late release freed the new holder"
        assert lock.try_acquire(prefix + ":next", 30), "the pool still serves"
    finally:
        lock.close()
        other.close()


def test_the_end_of_one_pooled_asyncio_session_loses_only_its_holdings(server: Server) -> None:
    def build() -> AsyncSessionLock[Any]:
        if server.url.startswith("postgresql"):
            return AsyncPgAdvisoryLock(server.url)
        return AsyncMySqlNamedLock(server.url)

    prefix = f"bounds-loss-aio:{uuid.uuid4().hex}"
    first, second = prefix + ":first", prefix + ":second"

    async def scenario() -> None:
        lock, other = build(), build()
        try:
            assert await lock.try_acquire(first, 30)
            busy = lock._sessions[0]
            await busy.mutex.acquire()  # white box: the next acquisition takes session 2
            try:
                assert await lock.try_acquire(second, 30)
            finally:
                busy.mutex.release()
            assert lock._session_of(second) is lock._sessions[1]
            await asyncio.to_thread(_end_session_of, lock, second, server.url)
            for _ in range(500):
                if await other.try_acquire(second, 30):
                    break
                await asyncio.sleep(0.02)
            else:
                pytest.fail("the ended session kept its lock")
            assert await lock.renew(second, 30) is False
            assert lock.is_lost(second)
            assert await lock.renew(first, 30) is True, "the other session's lock was lost"
            assert not lock.is_lost(first)
            assert await other.try_acquire(first, 30) is False
        finally:
            await lock.aclose()
            await other.aclose()

    asyncio.run(scenario())
