"""A session backend whose idle connection died while holding nothing reconnects at once.

No lock was lost in that case, so skipping the next run (raising LockBackendError)
would be a false alarm; a session that dies while holding a lock still raises (see
test_postgres_session_loss and test_mysql_session_loss).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import psycopg
import pymysql

from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_postgres import PgAdvisoryLock


def test_postgres_idle_session_killed_reconnects_without_error(postgres_url: str) -> None:
    lock = PgAdvisoryLock(postgres_url)
    name = "idle-reconnect:postgres"
    try:
        assert lock.try_acquire(name, 30)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            row = admin.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = %s",
                (PgAdvisoryLock.key(name),),
            ).fetchone()
            assert row is not None
            lock.release(name)
            admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
        assert lock.try_acquire(name, 30) is True
        assert lock.is_lost(name) is False
        lock.release(name)
    finally:
        lock.close()


def test_mysql_idle_session_killed_reconnects_without_error(mysql_url: str) -> None:
    lock = MySqlNamedLock(mysql_url)
    name = "idle-reconnect:mysql"
    server_name = MySqlNamedLock.server_name(name)
    try:
        assert lock.try_acquire(name, 30)
        parts = urlsplit(mysql_url)
        admin = pymysql.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=parts.username or "root",
            password=parts.password or "",
            autocommit=True,
        )
        try:
            with admin.cursor() as cursor:
                cursor.execute("SELECT IS_USED_LOCK(%s)", (server_name,))
                row = cursor.fetchone()
                assert row is not None
                assert row[0] is not None
                lock.release(name)
                cursor.execute(f"KILL {int(row[0])}")
        finally:
            admin.close()
        assert lock.try_acquire(name, 30) is True
        lock.release(name)
    finally:
        lock.close()
