"""SqlRunHistory against the run-history contract on SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history import HistoryError, resolve_history
from firefly_scheduling.settings import Settings
from firefly_scheduling.testing.history_contract import RunHistoryContract
from firefly_scheduling_database.engine import release_store_engine, store_engine
from firefly_scheduling_database.sql_history.store import SqlRunHistory

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _store(url: str) -> Iterator[SqlRunHistory]:
    store = SqlRunHistory(url, table=f"runs_{uuid.uuid4().hex[:12]}")
    try:
        yield store
    finally:
        store.table.drop(store.engine, checkfirst=True)
        store.close()


class TestSqliteHistory(RunHistoryContract):
    @pytest.fixture
    def history(self, tmp_path: Path) -> Iterator[SqlRunHistory]:
        yield from _store(f"sqlite:///{tmp_path / 'history.db'}")


class TestPostgresHistory(RunHistoryContract):
    @pytest.fixture
    def history(self, postgres_url: str) -> Iterator[SqlRunHistory]:
        yield from _store(postgres_url)


class TestMariaDbHistory(RunHistoryContract):
    @pytest.fixture
    def history(self, mysql_url: str) -> Iterator[SqlRunHistory]:
        yield from _store(mysql_url)


class TestStoreSelection:
    def test_the_database_lock_provider_records_history_in_its_database(
        self, tmp_path: Path
    ) -> None:
        url = f"sqlite:///{tmp_path / 'locks.db'}"
        history = resolve_history(Settings(lock_provider="database", lock_urls={"database": url}))
        assert isinstance(history, SqlRunHistory)
        assert history.start("app:job", T0, lock="app:job", node="a", token=1, at=T0) == 1
        history.close()

    def test_the_postgres_lock_provider_records_history_on_its_server(
        self, postgres_url: str
    ) -> None:
        history = resolve_history(
            Settings(lock_provider="postgres", lock_urls={"postgres": postgres_url})
        )
        assert isinstance(history, SqlRunHistory)
        assert history.engine.dialect.name == "postgresql"
        assert history.table.name == "firefly_scheduling_runs"
        assert history.runs(task=f"app:{uuid.uuid4().hex}") == []  # the table exists now
        history.close()

    def test_an_explicit_mysql_url_gets_pymysql(self, mysql_url: str) -> None:
        history = resolve_history(Settings(history_url=mysql_url))
        assert isinstance(history, SqlRunHistory)
        assert history.engine.dialect.driver == "pymysql"
        history.close()

    def test_an_unreachable_server_is_a_history_error_without_the_password(self) -> None:
        store = SqlRunHistory("postgresql://firefly:s3cret-pw@127.0.0.1:1/x")
        with pytest.raises(HistoryError) as caught:
            store.runs()
        assert "s3cret-pw" not in str(caught.value)
        assert "127.0.0.1" in str(caught.value)
        store.close()

    def test_an_in_memory_sqlite_database_is_refused(self) -> None:
        with pytest.raises(ConfigurationError):
            SqlRunHistory("sqlite://")

    def test_odd_table_names_are_refused(self) -> None:
        with pytest.raises(ConfigurationError):
            SqlRunHistory("sqlite:///x.db", table="runs; DROP TABLE users")


def test_a_mysql_store_connection_is_rolled_back_on_its_return_only_when_in_a_transaction(
    mysql_url: str,
) -> None:
    """The pool of the stores' engine on MySQL skips its rollback after a commit (one
    round trip a write saves), and still rolls back a connection returned mid-transaction:
    counted by the server for the session, and the uncommitted row never lands."""
    engine = store_engine(mysql_url, max_connections=2)  # the stores' share: one connection
    table = f"pool_{uuid.uuid4().hex[:12]}"
    try:
        assert engine.pool.status().startswith("Pool size: 1 "), engine.pool.status()
        with engine.begin() as connection:
            connection.exec_driver_sql(f"CREATE TABLE {table} (id INT PRIMARY KEY)")

        def rollbacks() -> int:
            raw = engine.raw_connection()  # no SQLAlchemy transaction: only the pool's reset
            try:
                cursor = raw.cursor()
                cursor.execute("SHOW SESSION STATUS LIKE 'Com_rollback'")
                [(_, count)] = cursor.fetchall()
                return int(count)
            finally:
                raw.close()

        before = rollbacks()
        with engine.begin() as connection:
            connection.exec_driver_sql(f"INSERT INTO {table} VALUES (1)")
        assert rollbacks() == before, "the pool rolled back a connection with no transaction"
        raw = engine.raw_connection()
        raw.cursor().execute(f"INSERT INTO {table} VALUES (2)")
        raw.close()
        assert rollbacks() == before + 1, "a connection returned in a transaction was kept so"
        with engine.connect() as connection:
            ids = connection.exec_driver_sql(f"SELECT id FROM {table}").scalars().all()
        assert ids == [1]
    finally:
        with engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        release_store_engine(engine)
