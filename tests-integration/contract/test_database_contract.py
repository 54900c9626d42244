"""DatabaseLeaseLock and AsyncDatabaseLeaseLock against the shared contract on SQLite,
PostgreSQL and MariaDB.

Each class works in its own freshly created table (dropped afterwards), so reruns
against the same servers are independent. The asyncio classes are given the very
URLs the synchronous ones get (plain `sqlite:///`, `postgresql://`, `mysql://`): the
async lock maps them to aiosqlite, psycopg's async connection and asyncmy, and the
cross-flavour case runs a synchronous lock on the same table and name against it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from firefly_scheduling.testing import AsyncLockContract, LockContract
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_database.engine import lock_engine

PASSWORD = "database-contract-secret"


class _LeaseTable:
    """A fresh lease table per class; a subclass provides `database_url`."""

    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls) -> str:
        raise NotImplementedError

    @pytest.fixture(scope="class")
    @classmethod
    def lease_table(cls, database_url: str) -> Iterator[str]:
        table = f"ff_contract_{uuid.uuid4().hex[:12]}"
        installer = DatabaseLeaseLock(database_url, table=table)
        installer.install()
        yield table
        engine = lock_engine(database_url)
        for created in installer.tables.all:
            created.drop(engine)
        engine.dispose()
        installer.close()


class DatabaseLeaseLockContract(_LeaseTable, LockContract):
    """The contract for one database; a subclass provides `database_url`."""

    @pytest.fixture
    def lock_factory(self, database_url: str, lease_table: str) -> partial[DatabaseLeaseLock]:
        return partial(DatabaseLeaseLock, database_url, table=lease_table)


class AsyncDatabaseLeaseLockContract(_LeaseTable, AsyncLockContract):
    """The asyncio contract for one database, next to the synchronous lock on it."""

    @pytest.fixture
    def lock_factory(self, database_url: str, lease_table: str) -> partial[AsyncDatabaseLeaseLock]:
        return partial(AsyncDatabaseLeaseLock, database_url, table=lease_table)

    @pytest.fixture
    def sync_lock_factory(self, database_url: str, lease_table: str) -> partial[DatabaseLeaseLock]:
        return partial(DatabaseLeaseLock, database_url, table=lease_table)


class TestSqliteDatabaseLeaseLockContract(DatabaseLeaseLockContract):
    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls, tmp_path_factory: pytest.TempPathFactory) -> str:
        # A file, not :memory:, so the process fuzz's processes share the database.
        path: Path = tmp_path_factory.mktemp("sqlite-contract") / "locks.sqlite"
        return f"sqlite:///{path}"


class TestPostgresDatabaseLeaseLockContract(DatabaseLeaseLockContract):
    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls, postgres_url: str) -> str:
        return postgres_url  # a plain postgresql:// URL: the lock maps it to psycopg 3

    @pytest.fixture
    def unreachable_lock(self) -> tuple[DatabaseLeaseLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return DatabaseLeaseLock(f"postgresql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD


class TestMariaDbDatabaseLeaseLockContract(DatabaseLeaseLockContract):
    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls, mysql_url: str) -> str:
        return mysql_url  # a plain mysql:// URL: the lock maps it to PyMySQL

    @pytest.fixture
    def unreachable_lock(self) -> tuple[DatabaseLeaseLock, str]:
        return DatabaseLeaseLock(f"mysql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD


class TestSqliteAsyncDatabaseLeaseLockContract(AsyncDatabaseLeaseLockContract):
    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls, tmp_path_factory: pytest.TempPathFactory) -> str:
        path: Path = tmp_path_factory.mktemp("sqlite-async-contract") / "locks.sqlite"
        return f"sqlite:///{path}"  # the sync spelling: mapped to aiosqlite


class TestPostgresAsyncDatabaseLeaseLockContract(AsyncDatabaseLeaseLockContract):
    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls, postgres_url: str) -> str:
        return postgres_url  # plain postgresql://: mapped to psycopg's async connection

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncDatabaseLeaseLock, str]:
        return AsyncDatabaseLeaseLock(f"postgresql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD


class TestMariaDbAsyncDatabaseLeaseLockContract(AsyncDatabaseLeaseLockContract):
    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls, mysql_url: str) -> str:
        return mysql_url  # plain mysql://: mapped to asyncmy

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncDatabaseLeaseLock, str]:
        return AsyncDatabaseLeaseLock(f"mysql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD
