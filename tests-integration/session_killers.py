"""Killers of the server session that holds a lock name, for the session-loss tests.

Each finds the one session holding `name` through the server's own lock table (never
anyone else's session on the shared server), ends it with a second client, and
returns once the server ended it. `kill_connection` ends a connection known by its
id instead (one a test found through the lock's own pool), by `CONNECTION_KILLS`'
statements for its server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
import pymysql
from sqlalchemy import Engine
from sqlalchemy import text as sql

from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import protocol as pg_sql

Killer = Callable[[str], None]


@dataclass(frozen=True)
class ConnectionKill:
    """How a server names the connection asking, ends another, and says if it lives."""

    whoami: str
    kill: str
    alive: str


#: By the conftest fixture giving the server's URL.
CONNECTION_KILLS = {
    "postgres_url": ConnectionKill(
        "SELECT pg_backend_pid()",
        "SELECT pg_terminate_backend(:victim)",
        "SELECT count(*) FROM pg_stat_activity WHERE pid = :victim",
    ),
    "mysql_url": ConnectionKill(
        "SELECT CONNECTION_ID()",
        "KILL :victim",
        "SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID = :victim",
    ),
}


def kill_connection(killer: Engine, how: ConnectionKill, victim: int) -> None:
    """End connection `victim` from one of `killer`'s; return once the server ended it."""
    with killer.begin() as connection:
        connection.execute(sql(how.kill), {"victim": victim})
    deadline = time.monotonic() + 10
    while True:  # the server takes a moment to end the killed session
        with killer.connect() as connection:
            if not connection.scalar(sql(how.alive), {"victim": victim}):
                return
        assert time.monotonic() < deadline, "the killed session did not end"
        time.sleep(0.05)


@dataclass(frozen=True)
class KillableServer:
    """A SQL server (its URL fixture's name in `CONNECTION_KILLS`) whose connections a
    test ends from a second client of its own."""

    server: str
    url: str

    @property
    def whoami(self) -> str:
        """The statement a connection asks its own id with."""
        return CONNECTION_KILLS[self.server].whoami

    def end(self, victim: int) -> None:
        """End connection `victim`; return once the server ended it."""
        end_session(self.server, self.url, victim)


def pg_holder(url: str, name: str) -> int | None:
    """The backend pid holding the advisory lock of `name` in the URL's database."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as admin:
        row = admin.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory'"
            " AND granted AND objsubid = 1 AND classid = %s::oid AND objid = %s::oid"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            pg_sql.holds_parameters(pg_sql.advisory_key(name)),
        ).fetchone()
    return None if row is None else int(row[0])


def mysql_holder(url: str, name: str) -> int | None:
    """The connection id holding the named lock of `name` (`IS_USED_LOCK`)."""
    admin = pymysql.connect(**connection_arguments(url), autocommit=True)
    try:
        with admin.cursor() as cursor:
            cursor.execute("SELECT IS_USED_LOCK(%s)", (MySqlNamedLock.server_name(name),))
            row = cursor.fetchone()
    finally:
        admin.close()
    return None if row is None or row[0] is None else int(row[0])


#: The holder of a name, by the conftest fixture giving the server's URL.
HOLDERS: dict[str, Callable[[str, str], int | None]] = {
    "postgres_url": pg_holder,
    "mysql_url": mysql_holder,
}


def end_session(server: str, url: str, victim: int) -> None:
    """End session `victim` on `server` (a URL fixture's name); return once it ended."""
    killer = lock_engine(url)
    try:
        kill_connection(killer, CONNECTION_KILLS[server], victim)
    finally:
        killer.dispose()


def session_killer(server: str, url: str) -> Killer:
    """Ends the session holding a name on `server` (a URL fixture's name)."""

    def kill(name: str) -> None:
        victim = HOLDERS[server](url, name)
        assert victim is not None, f"no session held {name!r}"
        end_session(server, url, victim)

    return kill


def pg_killer(url: str) -> Killer:
    return session_killer("postgres_url", url)


def mysql_killer(url: str) -> Killer:
    return session_killer("mysql_url", url)
