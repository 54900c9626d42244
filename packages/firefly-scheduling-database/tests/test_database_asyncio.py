"""`AsyncDatabaseLeaseLock` without a server: URL mapping, refusals, SQLite end to end.

The asyncio lock takes the URL a user gives the synchronous one and maps it to its
dialect's async driver; these cases pin that table, the refusals (worded as the
synchronous lock's, credentials never shown) and both ways of handing it your own
SQLAlchemy objects, on a SQLite file.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from firefly_scheduling import ConfigurationError
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_database.engine import async_lock_engine, lock_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from firefly_database_engine_arguments import connect_arguments

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    ("url", "dialect", "driver"),
    [
        (f"postgresql://app:{SECRET}@127.0.0.1:1/app", "postgresql", "psycopg_async"),
        (f"postgres://app:{SECRET}@127.0.0.1:1/app", "postgresql", "psycopg_async"),
        (f"postgresql+psycopg://app:{SECRET}@127.0.0.1:1/app", "postgresql", "psycopg_async"),
        (f"mysql://root:{SECRET}@127.0.0.1:1/test", "mysql", "asyncmy"),
        (f"mysql+pymysql://root:{SECRET}@127.0.0.1:1/test", "mysql", "asyncmy"),
        (f"mysql+asyncmy://root:{SECRET}@127.0.0.1:1/test", "mysql", "asyncmy"),
        (f"mariadb://root:{SECRET}@127.0.0.1:1/test", "mariadb", "asyncmy"),
        (f"mariadb+pymysql://root:{SECRET}@127.0.0.1:1/test", "mariadb", "asyncmy"),
        ("sqlite:///relative/locks.db", "sqlite", "aiosqlite"),
        ("sqlite+pysqlite:///relative/locks.db", "sqlite", "aiosqlite"),
        ("sqlite+aiosqlite:///relative/locks.db", "sqlite", "aiosqlite"),
    ],
)
def test_the_sync_urls_map_to_the_async_drivers(url: str, dialect: str, driver: str) -> None:
    engine = async_lock_engine(url)
    assert (engine.dialect.name, engine.url.get_driver_name()) == (dialect, driver)
    assert engine.dialect.is_async
    asyncio.run(engine.dispose())


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        (f"postgresql+asyncpg://app:{SECRET}@db/app", "postgresql+asyncpg"),
        (f"mysql+aiomysql://root:{SECRET}@db/test", "mysql+aiomysql"),
        (f"postgresql+psycopg2://app:{SECRET}@db/app", "postgresql+psycopg2"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis"),
    ],
)
def test_other_urls_are_refused_naming_provider_and_scheme(url: str, scheme: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        AsyncDatabaseLeaseLock(url)
    message = str(caught.value)
    assert "database lock provider" in message
    assert scheme in message
    assert SECRET not in message


def test_the_sync_lock_still_refuses_async_urls() -> None:
    """The synchronous lock's table is unchanged: an async driver is not one it can use."""
    with pytest.raises(ConfigurationError, match="sqlite\\+aiosqlite"):
        DatabaseLeaseLock("sqlite+aiosqlite:///locks.db")


def test_asyncmy_gets_the_same_bounds_except_the_write_timeout_it_lacks() -> None:
    """Connect and read timeouts, the row-lock wait, and no CLIENT_FOUND_ROWS."""
    engine = async_lock_engine(f"mysql://root:{SECRET}@127.0.0.1:1/test")
    connect_args = connect_arguments(engine.sync_engine)
    assert connect_args["connect_timeout"] == 5
    assert connect_args["read_timeout"] == 5
    assert "write_timeout" not in connect_args, "asyncmy.connect() has no write_timeout"
    assert "innodb_lock_wait_timeout = 2" in connect_args["init_command"]
    assert connect_args["client_flag"] & 2 == 0, "CLIENT_FOUND_ROWS must be off"
    sync_args = connect_arguments(lock_engine(f"mysql://root:{SECRET}@127.0.0.1:1/test"))
    assert sync_args["write_timeout"] == 5, "the synchronous engine keeps its write bound"


def test_something_that_is_not_a_database_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="URL, an AsyncEngine or an AsyncConnection"):
        AsyncDatabaseLeaseLock(42)  # type: ignore[arg-type]


def test_a_synchronous_engine_is_refused_by_name() -> None:
    engine = lock_engine("sqlite:///unused.sqlite")
    with pytest.raises(ConfigurationError, match="got Engine"):
        AsyncDatabaseLeaseLock(engine)  # type: ignore[arg-type]
    engine.dispose()


def test_repr_and_errors_never_show_the_password() -> None:
    lock = AsyncDatabaseLeaseLock(f"postgresql://app:{SECRET}@127.0.0.1:1/app")
    assert SECRET not in repr(lock)
    assert "psycopg_async" in repr(lock), "the target names the driver actually used"


def test_an_in_memory_database_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="in-memory"):
        AsyncDatabaseLeaseLock("sqlite+aiosqlite://")


# -- SQLite, end to end ---------------------------------------------------------------


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'locks.sqlite'}"
    installer = DatabaseLeaseLock(url)
    installer.install()
    yield url
    installer.close()


def test_a_missing_table_is_a_configuration_error(tmp_path: Path) -> None:
    async def scenario() -> None:
        lock = AsyncDatabaseLeaseLock(f"sqlite:///{tmp_path / 'empty.sqlite'}")
        with pytest.raises(ConfigurationError, match="firefly-scheduling migrate"):
            await lock.try_acquire("report", 30)
        await lock.install()
        assert await lock.try_acquire("report", 30)
        await lock.install()  # again: harmless
        await lock.aclose()

    asyncio.run(scenario())


def test_your_async_engine_runs_the_statements_through_sqlalchemy(sqlite_url: str) -> None:
    """An AsyncEngine of yours: its event listeners see every statement, and it stays open."""

    async def scenario() -> None:
        engine = create_async_engine(sqlite_url.replace("sqlite:", "sqlite+aiosqlite:", 1))
        seen: list[str] = []

        def listen(*args: Any) -> None:
            seen.append(args[2])  # the statement text

        event.listen(engine.sync_engine, "before_cursor_execute", listen)
        lock = AsyncDatabaseLeaseLock(engine)
        other = DatabaseLeaseLock(sqlite_url)
        assert await lock.try_acquire_fenced("report", 30) == 1
        assert other.try_acquire("report", 30) is False, "the sync flavour is excluded"
        assert await lock.renew("report", 30)
        await lock.release("report")
        assert other.try_acquire("report", 30)
        other.close()
        assert any(statement.startswith("INSERT INTO") for statement in seen)
        assert any(statement.startswith("DELETE FROM") for statement in seen)
        await lock.aclose()
        async with engine.connect() as connection:  # not disposed by the lock
            assert (await connection.execute(text("SELECT 1"))).scalar() == 1
        await engine.dispose()

    asyncio.run(scenario())


def test_inside_your_transaction_the_lease_commits_and_rolls_back_with_it(
    sqlite_url: str,
) -> None:
    """An AsyncConnection in a transaction: each call is a savepoint of it.

    Python's sqlite3 begins a transaction at the first write only (see the docs), so
    the caller writes first, as the docs advise.
    """

    async def scenario() -> None:
        engine: AsyncEngine = create_async_engine(
            sqlite_url.replace("sqlite:", "sqlite+aiosqlite:", 1)
        )
        async with engine.connect() as connection:
            await connection.begin()
            await connection.execute(
                text("INSERT INTO firefly_scheduling_locks_fences (name, value) VALUES ('x', 7)")
            )
            lock = AsyncDatabaseLeaseLock(connection)
            assert await lock.try_acquire("rolled-back", 30)
            await connection.rollback()
        async with engine.connect() as connection:
            rows = await connection.execute(text("SELECT name FROM firefly_scheduling_locks"))
            assert rows.scalars().all() == [], "the rolled-back lease left no row"
        await engine.dispose()
        checker = DatabaseLeaseLock(sqlite_url)
        assert checker.try_acquire("rolled-back", 30), "the name is free after the rollback"
        checker.close()

    asyncio.run(scenario())


def test_without_greenlet_the_sync_package_works_and_the_async_lock_names_the_extra(
    tmp_path: Path,
) -> None:
    """SQLAlchemy 2.1 installs greenlet only with `[asyncio]`: the sync side must not need it."""
    url = f"sqlite:///{tmp_path / 'g.sqlite'}"
    script = (
        "import sys\n"
        "sys.modules['greenlet'] = None  # as if it were not installed\n"
        "import firefly_scheduling_database as package\n"
        "from firefly_scheduling_database.anchor_store import DatabaseAnchorStore\n"
        "from firefly_scheduling_database.sql_history.store import SqlRunHistory\n"
        f"lock = package.DatabaseLeaseLock({url!r})\n"
        "lock.install()\n"
        "assert lock.try_acquire('report', 5)\n"
        "lock.close()\n"
        "try:\n"
        "    package.AsyncDatabaseLeaseLock\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "firefly-scheduling-database[asyncio]" in done.stdout
