"""A control store whose server ended its connections fails one call at most, then works.

The sessions are ended from a second client of the server (`pg_terminate_backend`
on PostgreSQL, `KILL` on MariaDB), only those of the test's own database. A call
that meets the dead connection raises `ControlStoreError`, never a driver error;
the next call reconnects.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from firefly_scheduling.control import ControlStoreError
from firefly_scheduling_database.control_store import DatabaseControlStore
from firefly_scheduling_database.control_store_async import AsyncDatabaseControlStore
from firefly_scheduling_database.engine import lock_engine
from fresh_tables import mysql_server_client

#: The PostgreSQL store's sessions carry this name, and only they are ended: the
#: other engines of the worker process keep theirs (a pooled connection ended under
#: another test's store would fail that test's first statement).
APPLICATION = "firefly-reconnect-test"


def _own_postgres_url(url: str) -> str:
    """`url` for the store under test: its own engine, its sessions named."""
    return (
        make_url(url)
        .update_query_dict({"application_name": APPLICATION})
        .render_as_string(hide_password=False)
    )


def _end_postgres_sessions(url: str) -> int:
    parsed = make_url(url)
    plain = parsed.difference_update_query(["application_name"]).render_as_string(
        hide_password=False
    )
    with psycopg.connect(plain, autocommit=True) as connection:
        ended = connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND application_name = %s AND pid <> pg_backend_pid()",
            (parsed.database, APPLICATION),
        ).fetchall()
    return len(ended)


def _end_mysql_sessions(url: str) -> int:
    parsed = make_url(url)
    connection = mysql_server_client(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM information_schema.processlist "
                "WHERE db = %s AND id <> CONNECTION_ID()",
                (parsed.database,),
            )
            sessions = [int(session) for (session,) in cursor.fetchall()]
            for session in sessions:
                cursor.execute(f"KILL {session}")
    finally:
        connection.close()
    return len(sessions)


SERVERS: dict[str, tuple[str, Callable[[str], int]]] = {
    "postgres": ("postgres_url", _end_postgres_sessions),
    "mariadb": ("mysql_url", _end_mysql_sessions),
}


def _drop(url: str, table: str) -> None:
    engine = lock_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))  # a fresh identifier
    finally:
        engine.dispose()


def _outcomes(calls: list[Callable[[], Any]]) -> list[str]:
    outcomes = []
    for call in calls:
        try:
            call()
        except ControlStoreError:
            outcomes.append("error")
        else:
            outcomes.append("ok")
    return outcomes


def _case(
    server: str, request: pytest.FixtureRequest
) -> tuple[str, Callable[[str], int], str, str]:
    """The server's URL, how to end its sessions, a fresh task and a fresh table."""
    fixture, end_sessions = SERVERS[server]
    url: str = request.getfixturevalue(fixture)
    if server == "postgres":
        url = _own_postgres_url(url)
    return (
        url,
        end_sessions,
        f"app.reconnect_{uuid.uuid4().hex}:job",
        f"control_{uuid.uuid4().hex[:12]}",
    )


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_the_sync_store_reconnects_after_its_sessions_end(
    server: str, request: pytest.FixtureRequest
) -> None:
    url, end_sessions, task, table = _case(server, request)
    store = DatabaseControlStore(url, table=table)
    try:
        store.pause(task, by="alice")
        assert end_sessions(url) >= 1, "the store held no session to end"
        outcomes = _outcomes([lambda: store.pause_of(task)] * 3)
        assert outcomes[1:] == ["ok", "ok"], outcomes
        assert store.pause_of(task) is not None
    finally:
        store.close()
        _drop(url, table)


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_the_async_store_reconnects_after_its_sessions_end(
    server: str, request: pytest.FixtureRequest
) -> None:
    url, end_sessions, task, table = _case(server, request)

    async def case() -> list[str]:
        store = AsyncDatabaseControlStore(url, table=table)
        try:
            await store.pause(task, by="alice")
            assert await asyncio.to_thread(end_sessions, url) >= 1, "no session to end"
            outcomes = []
            for _ in range(3):
                try:
                    await store.pause_of(task)
                except ControlStoreError:
                    outcomes.append("error")
                else:
                    outcomes.append("ok")
            return outcomes
        finally:
            await store.aclose()

    try:
        outcomes = asyncio.run(case())
    finally:
        _drop(url, table)
    assert outcomes[1:] == ["ok", "ok"], outcomes
