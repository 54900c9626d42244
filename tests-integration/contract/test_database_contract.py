"""DatabaseLeaseLock and AsyncDatabaseLeaseLock against the shared contract on SQLite,
PostgreSQL and MariaDB.

Each class works in its own freshly created table (dropped afterwards), so reruns
against the same servers are independent. The asyncio classes are given the very
URLs the synchronous ones get (plain `sqlite:///`, `postgresql://`, `mysql://`): the
async lock maps them to aiosqlite, psycopg's async connection and asyncmy, and the
cross-flavour case runs a synchronous lock on the same table and name against it.
The hostile-name cases also run on MariaDB and PostgreSQL sessions whose settings
change how SQL text is read (`session_settings`), read back on default sessions.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import pytest

from firefly_scheduling.testing import (
    AsyncHostileNamesContract,
    AsyncLockContract,
    HostileNamesContract,
    LockContract,
)
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # fresh_tables
from server_readers import LeaseTableReader
from session_settings import MYSQL_SETTINGS, POSTGRES_SETTINGS, with_setting

from fresh_tables import installed_lease_table, private_mysql_database

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
        with installed_lease_table(database_url, "ff_contract") as table:
            yield table

    @pytest.fixture
    def server_reader(self, database_url: str, lease_table: str) -> Iterator[LeaseTableReader]:
        reader = LeaseTableReader(database_url, lease_table)
        yield reader
        reader.close()


class _Locks(_LeaseTable):
    """The flavour's locks on the class's table, next to the synchronous lock on it."""

    lock_class: ClassVar[type[DatabaseLeaseLock] | type[AsyncDatabaseLeaseLock]] = DatabaseLeaseLock
    #: A URL of the class's kind whose port is closed on loopback (none for SQLite).
    unreachable_url: ClassVar[str | None] = None

    @pytest.fixture
    def lock_factory(self, database_url: str, lease_table: str) -> partial[Any]:
        return partial(self.lock_class, database_url, table=lease_table)

    @pytest.fixture
    def sync_lock_factory(self, database_url: str, lease_table: str) -> partial[DatabaseLeaseLock]:
        return partial(DatabaseLeaseLock, database_url, table=lease_table)

    @pytest.fixture
    def waiters_on_server(
        self, server_reader: LeaseTableReader, lease_table: str
    ) -> Callable[[str], int]:
        """Ticket rows of a name in the class's `<table>_queue`, read by a second client."""
        return server_reader.queued

    @pytest.fixture
    def unreachable_lock(self) -> tuple[Any, str]:
        if self.unreachable_url is None:
            pytest.skip("backend has no network address")
        return self.lock_class(self.unreachable_url), PASSWORD


class _AsyncLocks(_Locks):
    lock_class = AsyncDatabaseLeaseLock


class DatabaseLeaseLockContract(_Locks, LockContract):
    """The contract for one database; a subclass provides `database_url`."""


class AsyncDatabaseLeaseLockContract(_AsyncLocks, AsyncLockContract):
    """The asyncio contract for one database, next to the synchronous lock on it."""


class _Sqlite:
    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls, tmp_path_factory: pytest.TempPathFactory) -> str:
        # A file, not :memory:, so the process fuzz's processes share the database.
        path: Path = tmp_path_factory.mktemp("sqlite-contract") / "locks.sqlite"
        return f"sqlite:///{path}"  # the sync spelling: mapped to aiosqlite for asyncio


class _Postgres:
    # Port 1 on loopback is closed: the connection is refused at once.
    unreachable_url: ClassVar[str | None] = f"postgresql://app:{PASSWORD}@127.0.0.1:1/app"

    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls, postgres_url: str) -> str:
        return postgres_url  # plain postgresql://: psycopg 3, or its async connection


class _MariaDb:
    unreachable_url: ClassVar[str | None] = f"mysql://app:{PASSWORD}@127.0.0.1:1/app"

    @pytest.fixture(scope="class")
    @classmethod
    def database_url(cls, mysql_url: str) -> Iterator[str]:
        # A database of its own: the hostile-name cases list every table of it, and
        # other tests create and drop tables of their own in the shared one meanwhile.
        with private_mysql_database(mysql_url) as url:
            yield url  # plain mysql://: PyMySQL, or asyncmy


class TestSqliteDatabaseLeaseLockContract(_Sqlite, DatabaseLeaseLockContract):
    pass


class TestPostgresDatabaseLeaseLockContract(_Postgres, DatabaseLeaseLockContract):
    pass


class TestMariaDbDatabaseLeaseLockContract(_MariaDb, DatabaseLeaseLockContract):
    pass


class TestSqliteAsyncDatabaseLeaseLockContract(_Sqlite, AsyncDatabaseLeaseLockContract):
    pass


class TestPostgresAsyncDatabaseLeaseLockContract(_Postgres, AsyncDatabaseLeaseLockContract):
    pass


class TestMariaDbAsyncDatabaseLeaseLockContract(_MariaDb, AsyncDatabaseLeaseLockContract):
    pass


class _MariaDbSettings:
    """MariaDB sessions under each of `MYSQL_SETTINGS`, set through the lock's URL."""

    @pytest.fixture(scope="class", params=sorted(MYSQL_SETTINGS))
    @classmethod
    def database_url(cls, request: pytest.FixtureRequest, mysql_url: str) -> str:
        return with_setting(mysql_url, MYSQL_SETTINGS[request.param])


class _PostgresSettings:
    """PostgreSQL sessions under each of `POSTGRES_SETTINGS`, set through the lock's URL."""

    @pytest.fixture(scope="class", params=sorted(POSTGRES_SETTINGS))
    @classmethod
    def database_url(cls, request: pytest.FixtureRequest, postgres_url: str) -> str:
        return with_setting(postgres_url, POSTGRES_SETTINGS[request.param])


class TestMariaDbSessionSettingsDatabaseLeaseLock(_MariaDbSettings, _Locks, HostileNamesContract):
    pass


class TestMariaDbSessionSettingsAsyncDatabaseLeaseLock(
    _MariaDbSettings, _AsyncLocks, AsyncHostileNamesContract
):
    pass


class TestPostgresSessionSettingsDatabaseLeaseLock(_PostgresSettings, _Locks, HostileNamesContract):
    pass


class TestPostgresSessionSettingsAsyncDatabaseLeaseLock(
    _PostgresSettings, _AsyncLocks, AsyncHostileNamesContract
):
    pass
