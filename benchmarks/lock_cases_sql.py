"""The SQL cases of `benchmarks/locks.py`: PostgreSQL, MySQL/MariaDB and the database adapter.

Each backend gives its adapter, its floor (the raw driver sending the adapter's own
statements on one connection) and the peers that are installed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

from lock_case import MYSQL, POSTGRES, Case, lock_cycle, require, tooz_case, unique

# -- PostgreSQL -----------------------------------------------------------------------


def postgres_cases(stack: ExitStack) -> Iterator[Case]:
    import psycopg  # noqa: PLC0415 - optional benchmark dependency

    from firefly_scheduling_postgres import PgAdvisoryLock  # noqa: PLC0415

    lock = PgAdvisoryLock(POSTGRES)
    stack.callback(lock.close)
    yield Case("postgres", "PgAdvisoryLock", "adapter", lock_cycle(lock, unique("pg")))

    raw = psycopg.connect(POSTGRES, autocommit=True)
    stack.callback(raw.close)
    key = PgAdvisoryLock.key(unique("pg-raw"))

    def floor() -> None:
        won = raw.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        require(won == (True,), "raw pg_try_advisory_lock lost an uncontended key")
        raw.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()

    yield Case("postgres", "psycopg: try_advisory_lock + unlock", "floor", floor)

    try:
        import pals  # noqa: PLC0415

        locker = pals.Locker("bench", POSTGRES.replace("postgresql://", "postgresql+psycopg://"))
        pals_lock = locker.lock(unique("pals"), blocking=False)

        def pals_cycle() -> None:
            require(bool(pals_lock.acquire()), "uncontended cycle failed")
            pals_lock.release()

        yield Case("postgres", "pals", "peer", pals_cycle)
    except ImportError:
        pass
    yield from tooz_case(stack, "postgres", POSTGRES)


# -- MySQL / MariaDB --------------------------------------------------------------------


def mysql_cases(stack: ExitStack) -> Iterator[Case]:
    import pymysql  # noqa: PLC0415

    from firefly_scheduling_mysql import MySqlNamedLock  # noqa: PLC0415

    lock = MySqlNamedLock(MYSQL)
    stack.callback(lock.close)
    yield Case("mysql", "MySqlNamedLock", "adapter", lock_cycle(lock, unique("my")))

    from urllib.parse import urlsplit  # noqa: PLC0415

    parts = urlsplit(MYSQL)
    raw = pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        database=parts.path.lstrip("/") or None,
        autocommit=True,
    )
    stack.callback(raw.close)
    name = MySqlNamedLock.server_name(unique("my-raw"))

    def floor() -> None:
        with raw.cursor() as cursor:
            cursor.execute("SELECT GET_LOCK(%s, 0)", (name,))
            require(bool(cursor.fetchone() == (1,)), "uncontended cycle failed")
            cursor.execute("SELECT RELEASE_LOCK(%s)", (name,))
            cursor.fetchone()

    yield Case("mysql", "pymysql: GET_LOCK + RELEASE_LOCK", "floor", floor)
    yield from tooz_case(stack, "mysql", MYSQL)


# -- database (SQLAlchemy) --------------------------------------------------------------------


def database_cases(stack: ExitStack) -> Iterator[Case]:
    from firefly_scheduling_database import DatabaseLeaseLock  # noqa: PLC0415

    sqlite_path = stack.enter_context(tempfile.TemporaryDirectory()) + "/bench.sqlite3"
    urls = {
        "database/sqlite": f"sqlite:///{sqlite_path}",
        "database/postgres": POSTGRES.replace("postgresql://", "postgresql+psycopg://", 1),
        "database/mariadb": MYSQL.replace("mysql://", "mysql+pymysql://", 1),
    }
    for backend, database_url in urls.items():
        lock = DatabaseLeaseLock(database_url)
        lock.install()
        stack.callback(lock.close)
        yield Case(backend, "DatabaseLeaseLock", "adapter", lock_cycle(lock, unique("db")))
        yield database_floor(stack, backend, lock)


def database_floor(stack: ExitStack, backend: str, lock: Any) -> Case:
    """The raw DBAPI connection sending the adapter's own statements (upsert, DELETE).

    The statements are read from the lock (private attributes, on purpose): the floor
    must send exactly what the adapter sends, in the driver's own paramstyle, with a
    commit after each, and no pool or SQLAlchemy layer in between.
    """
    sql = lock._sql  # private on purpose: the exact statements
    raw = lock._bind.raw_connection()
    stack.callback(raw.close)
    connection = raw.dbapi_connection
    cursor = connection.cursor()
    key = sql.key(unique("db-raw"))
    ttl = sql.ttl(30.0)

    def floor() -> None:
        owner = os.urandom(16).hex()
        acquire = {"name": key, "owner": owner, "ttl": ttl}
        cursor.execute(sql.acquire.driver_sql, sql.acquire.driver_parameters(acquire))
        require(cursor.rowcount >= 1, "raw upsert lost an uncontended name")
        connection.commit()
        release = {"name": key, "owner": owner}
        cursor.execute(sql.release.driver_sql, sql.release.driver_parameters(release))
        connection.commit()

    return Case(backend, "DBAPI: the adapter's upsert + DELETE, commit each", "floor", floor)
