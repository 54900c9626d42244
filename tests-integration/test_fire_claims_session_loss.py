"""Database down mid-run: the session holding a running fire's lock is killed.

The body itself kills its node's lock session (PostgreSQL `pg_terminate_backend`,
MySQL `KILL`, of that session only), then waits for `current_fire().lost`. The
keep-alive's next check must notice within a few intervals and log it; the next
fire must reconnect and run normally.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pymysql
import pytest

from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.locks import BaseLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import PgAdvisoryLock

Killer = Callable[[str], None]


def kill_postgres_holder(url: str) -> Killer:
    def kill(name: str) -> None:
        unsigned = PgAdvisoryLock.key(name) & 0xFFFF_FFFF_FFFF_FFFF
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as admin:
            [(pid,)] = admin.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND objsubid = 1 AND classid = %s::oid AND objid = %s::oid",
                (unsigned >> 32, unsigned & 0xFFFF_FFFF),
            ).fetchall()
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    return kill


def kill_mysql_holder(url: str) -> Killer:
    def kill(name: str) -> None:
        admin = pymysql.connect(**connection_arguments(url), autocommit=True)
        with admin, admin.cursor() as cursor:
            cursor.execute("SELECT IS_USED_LOCK(%s)", (MySqlNamedLock.server_name(name),))
            row = cursor.fetchone()
            assert row is not None
            assert row[0] is not None
            cursor.execute("KILL %s", (int(row[0]),))

    return kill


@pytest.fixture(params=["postgres", "mysql"])
def scene(
    request: pytest.FixtureRequest, postgres_url: str, mysql_url: str, tmp_path: Path
) -> Iterator[tuple[BaseLock, Killer, SqlRunHistory]]:
    if request.param == "postgres":
        lock: BaseLock = PgAdvisoryLock(postgres_url)
        killer = kill_postgres_holder(postgres_url)
    else:
        lock = MySqlNamedLock(mysql_url)
        killer = kill_mysql_holder(mysql_url)
    history = SqlRunHistory(f"sqlite:///{tmp_path / 'history.db'}")
    yield lock, killer, history
    lock.close()
    history.close()


def test_a_killed_session_is_seen_by_the_body_and_the_next_fire_recovers(
    scene: tuple[BaseLock, Killer, SqlRunHistory], caplog: pytest.LogCaptureFixture
) -> None:
    lock, kill, history = scene
    target = f"session_loss_{uuid.uuid4().hex[:8]}:job"
    descriptor = ScheduledDescriptor(target=target, fixed_rate=1.0, lock_name=target, lock_ttl=30)
    runner = FireRunner(lock, history=history, keepalive_interval=0.2, node="n1")
    seen: list[bool] = []

    def body() -> None:
        kill(target)  # the session holding this run's task lock
        context = current_fire()
        assert context is not None
        deadline = time.monotonic() + 10
        while not context.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.append(context.lost)

    now = datetime.now(UTC).replace(microsecond=0)
    first = runner.run(Fire.at(descriptor, now), body)
    assert seen == [True]
    assert (first.verdict, first.lost) == (Verdict.SUCCEEDED, True)
    assert "is lost while the body runs" in caplog.text
    second = runner.run(Fire.at(descriptor, now + timedelta(seconds=1)), lambda: None)
    assert second.verdict is Verdict.SUCCEEDED
    assert not second.lost
    runner.close()
