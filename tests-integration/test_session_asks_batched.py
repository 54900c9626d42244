"""Checks and releases waiting for one session go to the server together, each answered.

A resident host takes the task locks of an instant's fires in one batch, on one
session, so their pre-body checks and their releases queue for that session's mutex.
Whoever takes it next sends every waiting check in one statement and every waiting
release in one (`locks/session_async.py`, `_Ask`). These tests make the asks wait (the test
holds the session's mutex), then read the server:

* MySQL's general log, filtered by the session's connection id (a second client
  finds it with `IS_USED_LOCK`), shows one statement for all the checks and one for
  all the releases, and naming each lock;
* after the batched release, a second client sees every lock free;
* a session killed while the asks wait answers every check False and marks every
  holding lost: an ask is never answered from another holding's success. This one
  also runs on PostgreSQL, whose checks and releases are sent one by one in a batch.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_postgres import protocol as pg_sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from session_killers import mysql_killer, pg_killer

#: Counts or changes what the whole server does: runs alone under xdist.
pytestmark = pytest.mark.alone

COUNT = 12


def _names(tag: str) -> list[str]:
    stamp = time.time_ns()
    return [f"asks-{tag}-{stamp}-{index}" for index in range(COUNT)]


def _session_id(reader: Any, name: str) -> int:
    with reader.cursor() as cursor:
        cursor.execute("SELECT IS_USED_LOCK(%s)", (MySqlNamedLock.server_name(name),))
        [(owner,)] = cursor.fetchall()
    assert owner is not None, f"nobody holds {name!r}"
    return int(owner)


@contextmanager
def _general_log(reader: Any) -> Iterator[Callable[[int, str], list[str]]]:
    """The server's general log in its table while inside; yields a reader of it."""
    with reader.cursor() as cursor:
        cursor.execute("SELECT @@GLOBAL.log_output, @@GLOBAL.general_log")
        [(output, enabled)] = cursor.fetchall()
        cursor.execute("SET GLOBAL log_output = 'TABLE'")
        cursor.execute("SET GLOBAL general_log = 1")

    def statements(thread_id: int, word: str) -> list[str]:
        with reader.cursor() as cursor:
            cursor.execute(
                "SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log"
                " WHERE thread_id = %s AND command_type = 'Query'",
                (thread_id,),
            )
            return [text for (text,) in cursor.fetchall() if word in text]

    try:
        yield statements
    finally:
        with reader.cursor() as cursor:
            cursor.execute("SET GLOBAL general_log = %s", (int(enabled),))
            cursor.execute("SET GLOBAL log_output = %s", (output,))


def _wait_for_asks(session: Any, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(session.asks) < count:
        assert time.monotonic() < deadline, f"{len(session.asks)} asks of {count} arrived"
        time.sleep(0.01)


def _queued(lock: Any, holdings: list[Holding], call: Callable[[Holding], Any]) -> list[Any]:
    """`call` of each holding from its own thread, all waiting for the session first."""
    session = lock._session_of(holdings[0].name)
    answers: list[Any] = [None] * len(holdings)

    def one(index: int) -> None:
        answers[index] = call(holdings[index])

    session.mutex.acquire()
    threads = [threading.Thread(target=one, args=(index,)) for index in range(len(holdings))]
    try:
        for thread in threads:
            thread.start()
        _wait_for_asks(session, len(holdings))
    finally:
        session.mutex.release()
    for thread in threads:
        thread.join(timeout=30)
    return answers


def _held(holdings: list[Holding | Any]) -> list[Holding]:
    assert all(isinstance(holding, Holding) for holding in holdings), holdings
    return list(holdings)


def test_waiting_checks_and_releases_are_one_statement_each(mysql_url: str) -> None:
    lock = MySqlNamedLock(mysql_url)
    reader = pymysql.connect(**connection_arguments(mysql_url), autocommit=True)
    try:
        names = _names("sync")
        holdings = _held(lock.acquire_many([(name, 30) for name in names]))
        session_id = _session_id(reader, names[0])
        assert {_session_id(reader, name) for name in names} == {session_id}
        with _general_log(reader) as statements:
            checked = _queued(lock, holdings, lambda holding: lock.renew_holding(holding, 30))
            released = _queued(lock, holdings, lock.release_holding)
            checks = statements(session_id, "= CONNECTION_ID()")
            releases = statements(session_id, "RELEASE_LOCK")
        assert checked == [True] * COUNT
        assert released == [None] * COUNT
        assert len(checks) == 1, checks
        assert len(releases) == 1, releases
        for name in names:
            assert MySqlNamedLock.server_name(name) in checks[0]
            assert MySqlNamedLock.server_name(name) in releases[0]
        with reader.cursor() as cursor:
            servers = [MySqlNamedLock.server_name(name) for name in names]
            cursor.execute("SELECT " + ", ".join(["IS_USED_LOCK(%s)"] * COUNT), servers)
            assert cursor.fetchall() == ((None,) * COUNT,)
        assert not any(holding.lost for holding in holdings)
    finally:
        reader.close()
        lock.close()


def test_asyncio_waiting_checks_are_one_statement(mysql_url: str) -> None:
    reader = pymysql.connect(**connection_arguments(mysql_url), autocommit=True)

    async def scenario() -> tuple[int, list[bool]]:
        lock = AsyncMySqlNamedLock(mysql_url)
        try:
            names = _names("aio")
            holdings = _held(await lock.acquire_many([(name, 30) for name in names]))
            session = lock._session_of(names[0])
            assert session is not None
            await session.mutex.acquire()
            try:
                tasks = [
                    asyncio.create_task(lock.renew_holding(holding, 30)) for holding in holdings
                ]
                while len(session.asks) < COUNT:
                    await asyncio.sleep(0.01)
            finally:
                session.mutex.release()
            answers = await asyncio.gather(*tasks)
            session_id = _session_id(reader, names[0])
            for holding in holdings:
                await lock.release_holding(holding)
            return session_id, answers
        finally:
            await lock.aclose()

    try:
        with _general_log(reader) as statements:
            session_id, answers = asyncio.run(scenario())
            checks = statements(session_id, "= CONNECTION_ID()")
        assert answers == [True] * COUNT
        assert len(checks) == 1, checks
        assert checks[0].count("IS_USED_LOCK") == COUNT
    finally:
        reader.close()


@pytest.mark.parametrize("backend", ["mysql", "postgres"])
def test_checks_waiting_for_a_killed_session_all_answer_lost(
    backend: str, mysql_url: str, postgres_url: str
) -> None:
    lock: MySqlNamedLock | PgAdvisoryLock
    if backend == "mysql":
        lock, kill = MySqlNamedLock(mysql_url), mysql_killer(mysql_url)
    else:
        lock, kill = PgAdvisoryLock(postgres_url), pg_killer(postgres_url)
    try:
        names = _names(backend)
        holdings = _held(lock.acquire_many([(name, 30) for name in names]))
        session = lock._session_of(names[0])
        assert session is not None
        answers: list[bool | None] = [None] * COUNT

        def check(index: int) -> None:
            answers[index] = lock.renew_holding(holdings[index], 30)

        session.mutex.acquire()
        threads = [threading.Thread(target=check, args=(index,)) for index in range(COUNT)]
        try:
            for thread in threads:
                thread.start()
            _wait_for_asks(session, COUNT)
            kill(names[0])
        finally:
            session.mutex.release()
        for thread in threads:
            thread.join(timeout=30)
        assert answers == [False] * COUNT
        assert all(holding.lost for holding in holdings)
        # The session is gone on the server: the names are free for anyone.
        other = type(lock)(mysql_url if backend == "mysql" else postgres_url)
        try:
            assert all(other.try_acquire(name, 30) for name in names)
        finally:
            other.close()
    finally:
        lock.close()


def test_postgres_waiting_checks_and_releases_are_answered_each(postgres_url: str) -> None:
    """Batched on PostgreSQL too (one statement each, keys in an array): every check is
    True, every release frees its own lock (a second client reads pg_locks), and a
    lock of the session that was not asked about stays held."""
    lock = PgAdvisoryLock(postgres_url)
    try:
        names = _names("pg")
        holdings = _held(lock.acquire_many([(name, 30) for name in [*names, f"{names[0]}-kept"]]))
        kept = holdings.pop()
        checked = _queued(lock, holdings, lambda holding: lock.renew_holding(holding, 30))
        released = _queued(lock, holdings, lock.release_holding)
        assert checked == [True] * COUNT
        assert released == [None] * COUNT
        assert not any(holding.lost for holding in holdings)
        with psycopg.connect(postgres_url, autocommit=True) as reader:
            held = [
                reader.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                    " AND objsubid = 1 AND classid = %s::oid AND objid = %s::oid",
                    pg_sql.holds_parameters(pg_sql.advisory_key(name)),
                ).fetchone()
                for name in [*names, kept.name]
            ]
        assert held == [(0,)] * COUNT + [(1,)]
        assert lock.renew_holding(kept, 30)
        lock.release_holding(kept)
    finally:
        lock.close()
