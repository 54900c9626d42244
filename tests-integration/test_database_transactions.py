"""DatabaseLeaseLock on a caller's `Connection`: savepoints keep the caller's transaction.

PostgreSQL aborts a whole transaction on any failed statement, so a lost race that
fails inside the caller's transaction would poison it without the savepoint. Each
test works in fresh tables, dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Column, Connection, Engine, Integer, MetaData, Table, event, insert, select
from sqlalchemy import text as sql

from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.engine import lock_engine


@dataclass
class Database:
    url: str
    table: str
    engine: Engine  # the application's own engine
    app_rows: Table  # a table of the application's, written in its transaction

    def node(self) -> DatabaseLeaseLock:
        """Another node, on its own engine."""
        return DatabaseLeaseLock(self.url, table=self.table)

    def committed_ids(self) -> list[int]:
        with self.engine.connect() as connection:
            return list(connection.scalars(select(self.app_rows.c.id).order_by("id")))


def _database(url: str) -> Iterator[Database]:
    suffix = uuid.uuid4().hex[:12]
    installer = DatabaseLeaseLock(url, table=f"ff_tx_{suffix}")
    installer.install()
    engine = lock_engine(url)
    app_rows = Table(f"ff_app_{suffix}", MetaData(), Column("id", Integer, primary_key=True))
    app_rows.create(engine)
    yield Database(url, installer.tables.locks.name, engine, app_rows)
    for table in (app_rows, *installer.tables.all):
        table.drop(engine)
    engine.dispose()
    installer.close()


@pytest.fixture
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    yield from _database(f"sqlite:///{tmp_path_factory.mktemp('tx') / 'locks.sqlite'}")


@pytest.fixture
def postgres_db(postgres_url: str) -> Iterator[Database]:
    yield from _database(postgres_url)


@pytest.fixture
def mariadb_db(mysql_url: str) -> Iterator[Database]:
    yield from _database(mysql_url)


@pytest.fixture(params=["sqlite_db", "postgres_db", "mariadb_db"])
def db(request: pytest.FixtureRequest) -> Database:
    database: Database = request.getfixturevalue(request.param)
    return database


def _count_savepoint_rollbacks(connection: Connection) -> list[str]:
    rolled_back: list[str] = []

    def record(conn: Connection, name: str, context: Any) -> None:
        rolled_back.append(name)

    event.listen(connection, "rollback_savepoint", record)
    return rolled_back


def _the_transaction_goes_on(db: Database, connection: Connection) -> None:
    """The caller's transaction (row 1 in it) takes row 2 and commits both."""
    connection.execute(insert(db.app_rows).values(id=2))
    connection.commit()
    assert db.committed_ids() == [1, 2]


def test_a_refused_acquire_leaves_the_callers_transaction_usable(db: Database) -> None:
    holder = db.node()
    assert holder.try_acquire("report", 30)
    with db.engine.connect() as connection:
        connection.execute(insert(db.app_rows).values(id=1))
        lock = DatabaseLeaseLock(connection, table=db.table)
        assert lock.try_acquire("report", 30) is False
        assert connection.in_transaction()
        _the_transaction_goes_on(db, connection)
    holder.close()


def test_a_lease_won_in_the_callers_transaction_commits_or_rolls_back_with_it(
    db: Database,
) -> None:
    with db.engine.connect() as connection:
        connection.execute(insert(db.app_rows).values(id=1))
        lock = DatabaseLeaseLock(connection, table=db.table)
        assert lock.try_acquire("rolled-back", 30)
        connection.rollback()
        connection.execute(insert(db.app_rows).values(id=2))
        assert lock.try_acquire("committed", 30)
        connection.commit()
    other = db.node()
    assert other.try_acquire("rolled-back", 30), "the acquisition outlived the rollback"
    assert other.try_acquire("committed", 30) is False
    assert db.committed_ids() == [2]
    other.close()


def test_without_an_open_transaction_each_call_commits_its_own(db: Database) -> None:
    with db.engine.connect() as connection:
        lock = DatabaseLeaseLock(connection, table=db.table)
        assert lock.try_acquire("job", 30)
        assert connection.in_transaction() is False
        other = db.node()
        assert other.try_acquire("job", 30) is False
        lock.release("job")
        assert other.try_acquire("job", 30)
        other.close()


def test_postgres_serialization_failure_is_a_lost_race_inside_a_savepoint(
    postgres_db: Database,
) -> None:
    db = postgres_db
    other = db.node()
    with db.engine.connect() as raw:
        connection = raw.execution_options(isolation_level="REPEATABLE READ")
        connection.execute(insert(db.app_rows).values(id=1))  # the snapshot is taken here
        assert other.try_acquire("report", 0.001)  # committed after that snapshot
        rolled_back = _count_savepoint_rollbacks(connection)
        lock = DatabaseLeaseLock(connection, table=db.table)
        # The row is invisible to the snapshot: PostgreSQL refuses to update it
        # ("could not serialize access"), and only the savepoint is rolled back.
        assert lock.try_acquire("report", 30) is False
        assert len(rolled_back) == 1
        _the_transaction_goes_on(db, connection)
    other.close()


def test_postgres_lock_wait_timeout_is_a_lost_race_inside_a_savepoint(
    postgres_db: Database,
) -> None:
    db = postgres_db
    with db.engine.connect() as blocker, db.engine.connect() as connection:
        blocker.execute(sql("SELECT 1"))  # open a transaction that will hold the row
        assert DatabaseLeaseLock(blocker, table=db.table).try_acquire("report", 30)
        connection.execute(sql("SET LOCAL lock_timeout = '200ms'"))
        connection.execute(insert(db.app_rows).values(id=1))
        rolled_back = _count_savepoint_rollbacks(connection)
        lock = DatabaseLeaseLock(connection, table=db.table)
        assert lock.try_acquire("report", 30) is False
        assert len(rolled_back) == 1
        connection.execute(insert(db.app_rows).values(id=2))
        connection.commit()
        blocker.rollback()
    assert db.committed_ids() == [1, 2]
