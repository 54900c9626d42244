"""A session lock is confirmed on the server just before a body starts.

Found by `benchmarks/chaos.py` (seed 120401, MySQL): a node took a task lock, a
connection reset ended its session while it recorded the fire's start, the server
freed the lock and another node took it, and the first node's body ran anyway. Its
pre-body check counted on a lease, which a session lock does not have: it ends with
its session at any moment, and only the server knows. The check now asks the server
on the session backends. The fault is real: a second client ends the holding session
on the real server between the acquisition and the body.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pymysql
import pytest

from firefly_scheduling import ScheduledDescriptor
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory
from firefly_scheduling.locks import BaseLock
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import PgAdvisoryLock


class RememberingPostgres(PgAdvisoryLock):
    """Remembers the server process of the session that took the last lock."""

    holder_pid = 0

    def _server_acquire_fenced(self, session: Any, name: str) -> int | None:
        self.holder_pid = session.connection.info.backend_pid
        return super()._server_acquire_fenced(session, name)

    def end_holding_session(self, url: str) -> None:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (self.holder_pid,))


class RememberingMySql(MySqlNamedLock):
    """Remembers the connection id of the session that took the last lock."""

    holder_id = 0

    def _server_acquire_fenced(self, connection: Any, name: str) -> int | None:
        self.holder_id = connection.thread_id()
        return super()._server_acquire_fenced(connection, name)

    def end_holding_session(self, url: str) -> None:
        admin = pymysql.connect(**connection_arguments(url), autocommit=True)
        with admin, admin.cursor() as cursor:
            cursor.execute("KILL %s", (self.holder_id,))


@pytest.mark.parametrize("backend", ["postgres", "mysql"])
def test_a_session_that_ended_before_the_body_skips_the_fire(
    backend: str, postgres_url: str, mysql_url: str
) -> None:
    url = postgres_url if backend == "postgres" else mysql_url
    lock: RememberingPostgres | RememberingMySql = (
        RememberingPostgres(url) if backend == "postgres" else RememberingMySql(url)
    )
    other: BaseLock = PgAdvisoryLock(url) if backend == "postgres" else MySqlNamedLock(url)
    name = f"session-before-body-{backend}-{uuid.uuid4().hex}"
    descriptor = ScheduledDescriptor(
        target=f"tests.session_before_body:{name}", lock_name=name, lock_ttl=30, fixed_rate=1.0
    )
    history = MemoryRunHistory()
    original_start = history.start
    taken_meanwhile: list[bool] = []

    def start_then_lose_the_session(*args: Any, **kwargs: Any) -> int | None:
        lock.end_holding_session(url)  # a reset while the node records the start
        taken_meanwhile.append(other.try_acquire(name, 30))  # the server freed it
        return original_start(*args, **kwargs)

    history.start = start_then_lose_the_session  # type: ignore[method-assign]
    runner = FireRunner(lock, history=history, keepalive_interval=60)
    ran: list[str] = []
    try:
        outcome = runner.run(Fire.at(descriptor, datetime.now(UTC)), lambda: ran.append("ran"))
        assert taken_meanwhile == [True], "the ended session's lock was not freed"
        assert ran == [], "the body ran on a lock another node held"
        assert outcome.verdict is Verdict.LOCK_LOST
    finally:
        other.release(name)
        runner.close()
        lock.close()
        other.close()
