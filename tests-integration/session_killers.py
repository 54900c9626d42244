"""Killers of the server session that holds a lock name, for the session-loss tests.

Each finds the one session holding `name` through the server's own lock table (never
anyone else's session on the shared server) and ends it with a second client.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pymysql

from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_postgres import protocol as pg_sql

Killer = Callable[[str], None]


def pg_killer(url: str) -> Killer:
    def kill(name: str) -> None:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as admin:
            row = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
                " AND granted AND objsubid = 1 AND classid = %s::oid AND objid = %s::oid"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                pg_sql.holds_parameters(pg_sql.advisory_key(name)),
            ).fetchone()
        assert row == (True,), f"no backend held {name!r}"

    return kill


def mysql_killer(url: str) -> Killer:
    def kill(name: str) -> None:
        admin = pymysql.connect(**connection_arguments(url), autocommit=True)
        try:
            with admin.cursor() as cursor:
                cursor.execute("SELECT IS_USED_LOCK(%s)", (MySqlNamedLock.server_name(name),))
                row = cursor.fetchone()
                assert row is not None
                assert row[0] is not None, f"nobody held {name!r}"
                cursor.execute("KILL %s", (int(row[0]),))
        finally:
            admin.close()

    return kill
