"""DatabaseLeaseLock on real servers: the database clock, bounded waits, reconnects.

Fault tests only ever kill this test's own connections.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, select
from sqlalchemy import text as sql

from firefly_scheduling import LockBackendError
from firefly_scheduling_database import DatabaseLeaseLock, operations
from firefly_scheduling_database.engine import lock_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_tables import installed_lease_table
from session_killers import KillableServer
from threads_together import run_together

DB_NOW = {
    "sqlite": "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
    "postgresql": "SELECT clock_timestamp()",
    "mysql": "SELECT UTC_TIMESTAMP(6)",
}


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('server') / 'locks.sqlite'}"
    url: str = request.getfixturevalue(
        "postgres_url" if request.param == "postgres" else "mysql_url"
    )
    return url


@pytest.fixture
def lease_table(database_url: str) -> Iterator[str]:
    with installed_lease_table(database_url, "ff_server") as table:
        yield table


def _utc(instant: datetime | str) -> datetime:
    parsed = datetime.fromisoformat(instant) if isinstance(instant, str) else instant
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


# -- the database clock ---------------------------------------------------------


def test_lease_instants_come_from_the_database_clock_not_the_apps(
    database_url: str, lease_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    skewed = time.time() + 3 * 3600
    monkeypatch.setattr(time, "time", lambda: skewed)  # this node's clock is 3 h fast
    lock = DatabaseLeaseLock(database_url, table=lease_table)
    assert lock.try_acquire("report", 7.25)
    engine = lock_engine(database_url)
    with engine.connect() as connection:
        locked_until, locked_at = connection.execute(
            select(lock.tables.locks.c.locked_until, lock.tables.locks.c.locked_at)
        ).one()
        db_now = _utc(connection.scalar(sql(DB_NOW[engine.dialect.name])))
    assert _utc(locked_until) - _utc(locked_at) == timedelta(seconds=7.25)
    assert timedelta(0) <= db_now - _utc(locked_at) < timedelta(seconds=5)
    assert abs(_utc(locked_at) - datetime.fromtimestamp(skewed, UTC)) > timedelta(hours=2)

    assert lock.renew("report", 9.5)
    with engine.connect() as connection:
        renewed_until, renewed_at = connection.execute(
            select(lock.tables.locks.c.locked_until, lock.tables.locks.c.locked_at)
        ).one()
        db_now = _utc(connection.scalar(sql(DB_NOW[engine.dialect.name])))
    assert renewed_at == locked_at, "renewal must not move the acquisition instant"
    assert timedelta(seconds=4.5) < _utc(renewed_until) - db_now <= timedelta(seconds=9.5)
    engine.dispose()
    lock.close()


# -- bounded waits and engine configuration ---------------------------------------


def test_postgres_engine_bounds_statements_and_row_lock_waits(postgres_url: str) -> None:
    engine = lock_engine(postgres_url)
    with engine.connect() as connection:
        assert connection.scalar(sql("SHOW statement_timeout")) == "5s"
        assert connection.scalar(sql("SHOW lock_timeout")) == "2s"
    engine.dispose()


def test_mariadb_engine_bounds_row_lock_waits_and_counts_changed_rows(mysql_url: str) -> None:
    engine = lock_engine(mysql_url)
    with engine.connect() as connection:
        assert connection.scalar(sql("SELECT @@SESSION.innodb_lock_wait_timeout")) == 2
        flags = connection.connection.dbapi_connection.client_flag  # type: ignore[union-attr]
        assert flags & 2 == 0, "CLIENT_FOUND_ROWS would blur the upsert's rowcount"
    engine.dispose()


@pytest.mark.parametrize("server", ["postgres_url", "mysql_url"])
def test_a_row_held_by_an_open_transaction_is_refused_within_the_lock_timeout(
    request: pytest.FixtureRequest, server: str
) -> None:
    url: str = request.getfixturevalue(server)
    table = f"ff_server_{uuid.uuid4().hex[:12]}"
    lock = DatabaseLeaseLock(url, table=table)
    lock.install()
    engine = lock_engine(url)
    with engine.connect() as blocker:
        blocker.execute(sql("SELECT 1"))  # an open transaction that will hold the row
        assert DatabaseLeaseLock(blocker, table=table).try_acquire("report", 30)
        started = time.monotonic()
        assert lock.try_acquire("report", 30) is False
        assert time.monotonic() - started < 10, "try_acquire must not wait for the holder"
        blocker.rollback()
    assert lock.try_acquire("report", 30)
    lock.release("report")
    for created in lock.tables.all:
        created.drop(engine)
    engine.dispose()
    lock.close()


# -- an application's own engine --------------------------------------------------


def test_mariadb_engine_with_sqlalchemys_found_rows_still_tells_won_from_held(
    mysql_url: str,
) -> None:
    engine: Engine = create_engine(mysql_url.replace("mysql://", "mysql+pymysql://", 1))
    with engine.connect() as connection:
        flags = connection.connection.dbapi_connection.client_flag  # type: ignore[union-attr]
        assert flags & 2, "SQLAlchemy's own MySQL engines count found rows"
    table = f"ff_server_{uuid.uuid4().hex[:12]}"
    first, second = DatabaseLeaseLock(engine, table=table), DatabaseLeaseLock(engine, table=table)
    first.install()
    assert first.try_acquire("report", 0.3)
    assert second.try_acquire("report", 30) is False  # rowcount 1 here, yet not won
    time.sleep(0.4)
    assert second.try_acquire("report", 30)
    first.release("report")
    assert first.try_acquire("report", 30) is False
    second.release("report")
    assert first.try_acquire_fenced("report", 30) == 1
    first.release("report")
    for created in first.tables.all:
        created.drop(engine)
    engine.dispose()


# -- faults -----------------------------------------------------------------------


@pytest.mark.parametrize("built_from", ["url", "engine"])
def test_a_killed_connection_raises_once_then_the_next_call_reconnects(
    killable_server: KillableServer, built_from: str
) -> None:
    table = f"ff_server_{uuid.uuid4().hex[:12]}"
    if built_from == "url":  # statements go straight to the pooled driver connection
        lock = DatabaseLeaseLock(killable_server.url, table=table)
        engine: Engine = lock._bind  # type: ignore[assignment] # the pool's identity, for the kill
    else:  # statements go through SQLAlchemy's execution layer
        engine = lock_engine(killable_server.url)
        lock = DatabaseLeaseLock(engine, table=table)
    lock.install()
    assert lock.try_acquire("before", 30)
    with engine.connect() as pooled:  # the pool's only connection: the lock's own
        victim = int(pooled.scalar(sql(killable_server.whoami)))
    killable_server.end(victim)
    with pytest.raises(LockBackendError, match="database lock backend"):
        lock.try_acquire("during", 30)
    assert lock.try_acquire("after", 30), "the next call must reconnect"
    lock.release("after")
    lock.release("before")
    for created in lock.tables.all:
        created.drop(engine)
    engine.dispose()
    lock.close()


def test_install_is_safe_when_several_nodes_run_it_at_once(
    database_url: str,
) -> None:
    table = f"ff_server_{uuid.uuid4().hex[:12]}"
    nodes = [DatabaseLeaseLock(database_url, table=table) for _ in range(6)]
    assert run_together(DatabaseLeaseLock.install, nodes, timeout=60) == []
    assert nodes[0].try_acquire("installed", 30)
    assert nodes[1].try_acquire("installed", 30) is False
    nodes[0].release("installed")
    engine = lock_engine(database_url)
    for created in nodes[0].tables.all:
        created.drop(engine)
    engine.dispose()
    for node in nodes:
        node.close()


# -- fenced acquisition, autocommit and purging -------------------------------------


def test_a_refused_fenced_acquire_consumes_no_token(database_url: str, lease_table: str) -> None:
    holder = DatabaseLeaseLock(database_url, table=lease_table)
    contender = DatabaseLeaseLock(database_url, table=lease_table)
    first = holder.try_acquire_fenced("report", 30)
    assert first == 1
    assert contender.try_acquire_fenced("report", 30) is None
    holder.release("report")
    assert contender.try_acquire_fenced("report", 30) == first + 1
    assert holder._fence("report") == first + 2, "the plain fence hook shares the counter"
    contender.release("report")
    holder.close()
    contender.close()


# PostgreSQL takes the lease and its fence in one statement: they cannot come apart.
@pytest.mark.parametrize("database_url", ["sqlite", "mariadb"], indirect=True)
def test_a_lapsed_lease_is_never_fenced(database_url: str, lease_table: str) -> None:
    """The second statement of a two-statement fenced acquire counts only for a live lease."""
    lock = DatabaseLeaseLock(database_url, table=lease_table)
    assert lock._sql.acquire_fenced is None, "this dialect fences in a second statement"
    assert lock.try_acquire("report", 0.05)
    holding = lock.holding("report")
    assert holding is not None
    owner = holding.owner
    time.sleep(0.2)
    fence = partial(operations.fence_held, sql=lock._sql, name="report", owner=owner)
    assert lock._transactions.run(fence) is None
    assert lock.try_acquire_fenced("report", 30) == 1, "the refused fence wrote nothing"
    lock.release("report")
    lock.close()


def test_the_locks_own_connections_commit_each_statement(
    database_url: str, lease_table: str
) -> None:
    """Autocommit: a lease is visible to others at once, with no transaction left open."""
    lock = DatabaseLeaseLock(database_url, table=lease_table)
    assert lock.try_acquire_fenced("report", 30) == 1
    engine: Engine = lock._bind  # type: ignore[assignment] # the lock's own pool
    with engine.connect() as pooled:
        assert _in_autocommit(pooled.connection.dbapi_connection)
    other = lock_engine(database_url)
    with other.connect() as connection:
        holders = connection.execute(select(lock.tables.locks.c.name)).scalars().all()
    assert list(holders) == [b"report" if other.dialect.name == "mysql" else "report"]
    other.dispose()
    lock.release("report")
    lock.close()


def test_purge_deletes_expired_leases_only(database_url: str, lease_table: str) -> None:
    lock = DatabaseLeaseLock(database_url, table=lease_table)
    assert lock.try_acquire("claim-expired", 0.05)
    assert lock.try_acquire("claim-live", 30)
    time.sleep(0.2)
    assert lock.purge_expired() == 1
    assert lock.is_held("claim-live")
    other = DatabaseLeaseLock(database_url, table=lease_table)
    assert other.try_acquire("claim-live", 30) is False
    assert other.try_acquire("claim-expired", 30)
    other.release("claim-expired")
    lock.release("claim-live")
    lock.close()
    other.close()


def test_acquisitions_purge_expired_claims_about_once_a_minute(
    database_url: str, lease_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = DatabaseLeaseLock(database_url, table=lease_table)
    for k in range(3):  # claims: taken, never released, left to expire
        assert lock.try_claim(f"firefly:fire:{k}", 0.05)
    time.sleep(0.2)
    engine = lock_engine(database_url)

    def rows() -> int:
        with engine.connect() as connection:
            return len(connection.execute(select(lock.tables.locks.c.name)).all())

    lock._upkeep.next_purge = time.monotonic() + 3600  # not due: nothing is deleted
    assert lock.try_acquire("report", 30)
    assert rows() == 4
    lock.release("report")
    lock._upkeep.next_purge = time.monotonic()  # due: the next acquisition purges
    assert lock.try_acquire("report", 30)
    assert rows() == 1
    assert lock._upkeep.next_purge >= time.monotonic() + 50, "and the next purge is a minute away"
    lock.release("report")
    engine.dispose()
    lock.close()


def _in_autocommit(dbapi: Any) -> bool:
    """Whether a psycopg, PyMySQL or sqlite3 connection commits each statement itself."""
    flag = getattr(dbapi, "autocommit", None)
    if isinstance(flag, bool):  # psycopg
        return flag
    if callable(flag):  # PyMySQL
        return bool(dbapi.get_autocommit())
    return dbapi.isolation_level is None  # sqlite3
