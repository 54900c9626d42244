"""The task locks of the fires won, taken with their claims on a backend that batches them.

On Redis (one server or a cluster), memcached, PostgreSQL, MySQL and the database
backend on PostgreSQL, MySQL and SQLite, `FireRunner.claim_fires` takes the
task locks of the fires it won as one request (`capabilities.batch_acquires`), so
a won fire's worker sends only its release (a blocking round trip per
fire from many threads cost more CPU in thread switches than the request). The
rules of a lock taken by the run itself must hold, checked by another node's lock
asking the server: the holding is on the server before the body, a held lock skips
the fire, and a holding whose fire never runs is released, never leaked.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
import redis

from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_memcached import MemcachedLock
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_redis import RedisLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from claimed_fires import Clock, tasks

GRACE = 5.0
BATCHING = (
    *("redis", "redis-cluster", "memcached", "postgres", "mysql"),
    *("database-postgres", "database-mysql", "database-sqlite"),
)


def installed(lock: DatabaseLeaseLock) -> DatabaseLeaseLock:
    lock.install()
    return lock


@pytest.fixture(params=BATCHING)
def nodes(
    request: pytest.FixtureRequest,
    redis_url: str,
    redis_cluster_url: str,
    memcached_url: str,
    postgres_url: str,
    mysql_url: str,
    tmp_path: Path,
) -> Iterator[Callable[[], BaseLock]]:
    """Locks of one backend, each a node of its own; closed at the end."""
    sqlite_url = f"sqlite:///{tmp_path / 'locks.sqlite'}"
    build: Callable[[], BaseLock] = {
        "redis": lambda: RedisLock(redis_url),
        "redis-cluster": lambda: RedisLock(redis_cluster_url),
        "memcached": lambda: MemcachedLock(memcached_url),
        "postgres": lambda: PgAdvisoryLock(postgres_url),
        "mysql": lambda: MySqlNamedLock(mysql_url),
        "database-postgres": lambda: installed(DatabaseLeaseLock(postgres_url)),
        "database-mysql": lambda: installed(DatabaseLeaseLock(mysql_url)),
        "database-sqlite": lambda: installed(DatabaseLeaseLock(sqlite_url)),
    }[request.param]
    built: list[BaseLock] = []

    def node() -> BaseLock:
        built.append(build())
        return built[-1]

    yield node
    for lock in built:
        lock.close()


def test_won_fires_hold_their_task_locks_on_the_server_before_a_worker_runs_them(
    nodes: Callable[[], BaseLock],
) -> None:
    lock, other = nodes(), nodes()
    assert lock.capabilities.batch_acquires
    clock = Clock()
    history = MemoryRunHistory()
    runner = FireRunner(lock, history=history, clock=clock, grace=GRACE)
    fires = tasks(3)
    outcomes = runner.claim_fires([Fire.at(descriptor, clock.now) for descriptor in fires])
    for descriptor, outcome in zip(fires, outcomes, strict=True):
        assert outcome.task_lock is not None, outcome
        holding = outcome.task_lock.answer
        assert isinstance(holding, Holding), outcome
        assert holding.fence is not None, "the task lock is fenced as the run's own would be"
        assert other.try_acquire(descriptor.lock_name or "", 30) is False, "not on the server"
    held_in_body: list[bool] = []
    for descriptor, outcome in zip(fires, outcomes, strict=True):
        name = descriptor.lock_name or ""

        def body(name: str = name) -> None:
            held_in_body.append(not other.try_acquire(name, 30))

        result = runner.run(Fire.at(descriptor, clock.now), body, claim=outcome)
        assert result.verdict is Verdict.SUCCEEDED, result
        assert outcome.task_lock is not None
        assert isinstance(outcome.task_lock.answer, Holding)
        assert result.token == outcome.task_lock.answer.fence
        assert other.try_acquire(name, 30), "the task lock outlived its run"
        other.release(name)
    assert held_in_body == [True, True, True]
    for descriptor in fires:
        assert [record.state for record in history.runs(descriptor.target)] == [RunState.SUCCEEDED]


def test_a_task_lock_held_elsewhere_skips_the_fire_it_was_taken_for(
    nodes: Callable[[], BaseLock],
) -> None:
    lock, other = nodes(), nodes()
    clock = Clock()
    history = MemoryRunHistory()
    runner = FireRunner(lock, history=history, clock=clock, grace=GRACE)
    [descriptor] = tasks(1)
    name = descriptor.lock_name or ""
    assert other.try_acquire(name, 30)  # the previous fire still runs, on another node
    [outcome] = runner.claim_fires([Fire.at(descriptor, clock.now)])
    assert outcome.verdict is Verdict.SUCCEEDED
    assert outcome.task_lock is not None
    assert outcome.task_lock.answer is None
    ran: list[int] = []
    result = runner.run(Fire.at(descriptor, clock.now), lambda: ran.append(1), claim=outcome)
    assert result.verdict is Verdict.OVERLAPPING
    assert ran == []
    assert nodes().try_acquire(name, 30) is False, "the other node's lock was taken"
    assert [record.state for record in history.runs(descriptor.target)] == [RunState.SKIPPED]
    other.release(name)
    assert lock.try_acquire(name, 30), "the batch left a lock behind on this node"
    lock.release(name)


def test_a_fire_too_late_for_its_worker_releases_the_task_lock_taken_with_its_claim(
    nodes: Callable[[], BaseLock],
) -> None:
    """A fire that waited past grace for a worker is skipped; its lock must not stay held
    (on the server, and in this node's ledger, which would refuse the task's next fires)."""
    lock, other = nodes(), nodes()
    clock = Clock()
    runner = FireRunner(lock, history=MemoryRunHistory(), clock=clock, grace=GRACE)
    [descriptor] = tasks(1)
    name = descriptor.lock_name or ""
    instant = clock.now
    [outcome] = runner.claim_fires([Fire.at(descriptor, instant)])
    assert outcome.task_lock is not None
    assert isinstance(outcome.task_lock.answer, Holding)
    clock.now = instant + timedelta(seconds=GRACE + 1)
    result = runner.run(Fire.at(descriptor, instant), lambda: None, claim=outcome)
    assert result.verdict is Verdict.TOO_LATE
    assert outcome.task_lock.answer.released
    assert other.try_acquire(name, 30), "the task lock of a skipped fire leaked"
    other.release(name)
    assert lock.try_acquire(name, 30), "this node's ledger still held the task lock"
    lock.release(name)


def test_redis_task_locks_carry_their_holdings_owner_tokens(redis_url: str) -> None:
    """A second client reads each key: the value is the holding's own owner token."""
    lock = RedisLock(redis_url)
    server = redis.Redis.from_url(redis_url)
    try:
        clock = Clock()
        runner = FireRunner(lock, history=MemoryRunHistory(), clock=clock, grace=GRACE)
        fires = tasks(2)
        outcomes = runner.claim_fires([Fire.at(descriptor, clock.now) for descriptor in fires])
        for descriptor, outcome in zip(fires, outcomes, strict=True):
            assert outcome.task_lock is not None
            holding = outcome.task_lock.answer
            assert isinstance(holding, Holding)
            assert server.get(RedisLock.key(descriptor.lock_name or "")) == holding.owner.encode()
            lock.release_holding(holding)
    finally:
        server.close()
        lock.close()


def test_postgres_task_locks_of_a_batch_are_on_one_session(postgres_url: str) -> None:
    """pg_locks, read by a second connection: every lock won in one session, none left."""
    lock = PgAdvisoryLock(postgres_url)
    try:
        names = [descriptor.lock_name or "" for descriptor in tasks(3)]
        holdings = lock.acquire_many([(name, 30) for name in names], fenced=True)
        assert all(isinstance(holding, Holding) for holding in holdings), holdings
        keys = [PgAdvisoryLock.key(name) for name in names]
        with psycopg.connect(postgres_url, autocommit=True) as reader:
            pids = reader.execute(
                "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND ((classid::bigint << 32) | objid::bigint) = ANY(%s) AND objsubid = 1",
                (keys,),  # the expression is the signed key, as the lock's
            ).fetchall()
            assert len(pids) == 1, pids
            for holding in holdings:
                assert isinstance(holding, Holding)
                lock.release_holding(holding)
            left = reader.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s",
                (pids[0][0],),
            ).fetchone()
            assert left == (0,), "a released lock of the batch stayed on its session"
    finally:
        lock.close()


def test_mysql_task_locks_of_a_batch_are_on_one_session_with_their_own_tokens(
    mysql_url: str,
) -> None:
    """A second connection asks the server: every lock won is held by one connection,
    each token is its name's fence counter, and a name held elsewhere is neither won
    nor counted."""
    lock = MySqlNamedLock(mysql_url)
    reader = pymysql.connect(**connection_arguments(mysql_url), autocommit=True)
    other = MySqlNamedLock(mysql_url)
    try:
        names = [descriptor.lock_name or "" for descriptor in tasks(4)]
        assert other.try_acquire(names[2], 30)
        fenced_before = other.acquire(names[3], 30, fenced=True)
        assert isinstance(fenced_before, Holding)
        other.release_holding(fenced_before)
        with reader.cursor() as cursor:
            cursor.execute(
                "SELECT value FROM firefly_scheduling_fences WHERE name = %s",
                (MySqlNamedLock.server_name(names[2]),),
            )
            held_elsewhere_counter = cursor.fetchall()
        holdings = lock.acquire_many([(name, 30) for name in names], fenced=True)
        assert holdings[2] is None, holdings
        won = [holding for holding in holdings if isinstance(holding, Holding)]
        assert [holding.name for holding in won] == [names[0], names[1], names[3]]
        assert won[2].fence is not None
        assert fenced_before.fence is not None
        assert won[2].fence > fenced_before.fence
        with reader.cursor() as cursor:
            servers = [MySqlNamedLock.server_name(holding.name) for holding in won]
            cursor.execute(
                "SELECT IS_USED_LOCK(%s), IS_USED_LOCK(%s), IS_USED_LOCK(%s)", tuple(servers)
            )
            [owners] = cursor.fetchall()
            assert len(set(owners)) == 1, owners
            assert None not in owners
            for holding, server in zip(won, servers, strict=True):
                cursor.execute(
                    "SELECT value FROM firefly_scheduling_fences WHERE name = %s", (server,)
                )
                assert cursor.fetchall() == ((holding.fence,),)
            cursor.execute(
                "SELECT value FROM firefly_scheduling_fences WHERE name = %s",
                (MySqlNamedLock.server_name(names[2]),),
            )
            assert cursor.fetchall() == held_elsewhere_counter, "a lock not won was counted"
        for holding in won:
            lock.release_holding(holding)
        with reader.cursor() as cursor:
            cursor.execute(
                "SELECT IS_USED_LOCK(%s), IS_USED_LOCK(%s), IS_USED_LOCK(%s)", tuple(servers)
            )
            assert cursor.fetchall() == ((None, None, None),), "a released lock stayed held"
    finally:
        reader.close()
        other.close()
        lock.close()


class LeaseTables:
    """A second client of the database lock's tables, on the server's own driver."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.mysql = url.startswith("mysql")
        self.connection: Any = (
            pymysql.connect(**connection_arguments(url), autocommit=True)
            if self.mysql
            else psycopg.connect(url, autocommit=True)
        )

    def rows(self, names: Sequence[str]) -> set[tuple[str, str, int | None]]:
        """`(name, locked_by, fence)` of each lease row of `names`."""
        marks = ", ".join(["%s"] * len(names))
        cursor = self.connection.cursor()
        cursor.execute(
            "SELECT l.name, l.locked_by, f.value FROM firefly_scheduling_locks AS l"
            " LEFT JOIN firefly_scheduling_locks_fences AS f ON f.name = l.name"
            f" WHERE l.name IN ({marks})",
            [self._key(name) for name in names],
        )
        return {(self._text(name), owner, fence) for name, owner, fence in cursor.fetchall()}

    def block(self, name: str) -> Any:
        """A transaction left open on a new row of `name`: other writers of it wait."""
        blocker: Any = (
            pymysql.connect(**connection_arguments(self.url), autocommit=False)
            if self.mysql
            else psycopg.connect(self.url)
        )
        later = "UTC_TIMESTAMP(6) + INTERVAL 30 SECOND" if self.mysql else "now() + interval '30s'"
        blocker.cursor().execute(
            "INSERT INTO firefly_scheduling_locks (name, locked_by, locked_until, locked_at)"
            f" VALUES (%s, 'blocker', {later}, {later})",
            (self._key(name),),
        )
        return blocker

    def close(self) -> None:
        self.connection.close()

    def _key(self, name: str) -> object:
        return name.encode() if self.mysql else name

    @staticmethod
    def _text(value: object) -> str:
        return bytes(value).decode() if isinstance(value, bytes | bytearray) else str(value)


@pytest.fixture(params=("postgres", "mysql"))
def lease_database(request: pytest.FixtureRequest, postgres_url: str, mysql_url: str) -> str:
    return postgres_url if request.param == "postgres" else mysql_url


def test_database_task_locks_of_a_batch_are_lease_rows_with_their_own_tokens(
    lease_database: str,
) -> None:
    """A second connection reads the tables: each lease row carries its holding's owner
    token, each fence its token, and a lease held elsewhere is neither taken nor counted."""
    lock = installed(DatabaseLeaseLock(lease_database))
    other = DatabaseLeaseLock(lease_database)
    tables = LeaseTables(lease_database)
    try:
        names = [descriptor.lock_name or "" for descriptor in tasks(3)]
        assert other.try_acquire(names[1], 30)
        holdings = lock.acquire_many([(name, 30) for name in names], fenced=True)
        assert holdings[1] is None, holdings
        won = [holding for holding in holdings if isinstance(holding, Holding)]
        assert [holding.name for holding in won] == [names[0], names[2]]
        rows = tables.rows(names)
        expected = {(holding.name, holding.owner, holding.fence) for holding in won}
        assert {row for row in rows if row[0] != names[1]} == expected
        [(_, _, held_elsewhere_fence)] = [row for row in rows if row[0] == names[1]]
        assert held_elsewhere_fence is None, "a lease not won was counted"
        for holding in won:
            lock.release_holding(holding)
        assert {row[0] for row in tables.rows(names)} == {names[1]}, "a released lease stayed"
    finally:
        tables.close()
        other.close()
        lock.close()


def test_a_database_batch_that_meets_another_transaction_loses_only_that_name(
    lease_database: str,
) -> None:
    """Another transaction's uncommitted row makes the batch's statement wait, then fail
    as contention (a lock wait timeout); the names are then taken one by one, so only
    the contended one is lost, and nothing the batch took is left behind."""
    lock = installed(DatabaseLeaseLock(lease_database))
    tables = LeaseTables(lease_database)
    try:
        names = [descriptor.lock_name or "" for descriptor in tasks(3)]
        blocker = tables.block(names[1])
        try:
            holdings = lock.acquire_many([(name, 30) for name in names], fenced=True)
        finally:
            blocker.rollback()
            blocker.close()
        assert holdings[1] is None, holdings
        won = [holding for holding in holdings if isinstance(holding, Holding)]
        assert [holding.name for holding in won] == [names[0], names[2]], holdings
        rows = tables.rows(names)
        assert rows == {(holding.name, holding.owner, holding.fence) for holding in won}
        for holding in won:
            lock.release_holding(holding)
    finally:
        tables.close()
        lock.close()


@pytest.mark.alone
def test_a_redis_batch_sent_to_a_server_that_forgot_the_script_loads_it_and_wins(
    redis_url: str,
) -> None:
    """A restart or `SCRIPT FLUSH` empties the script cache: every `EVALSHA` of the
    pipeline answers NOSCRIPT (none ran), and the batch is sent again once loaded."""
    lock = RedisLock(redis_url)
    server = redis.Redis.from_url(redis_url)
    try:
        names = [descriptor.lock_name or "" for descriptor in tasks(3)]
        server.script_flush()
        holdings = lock.acquire_many([(name, 30) for name in names], fenced=True)
        for name, holding in zip(names, holdings, strict=True):
            assert isinstance(holding, Holding), holdings
            assert holding.fence is not None
            assert server.get(RedisLock.key(name)) == holding.owner.encode()
            lock.release_holding(holding)
    finally:
        server.close()
        lock.close()
