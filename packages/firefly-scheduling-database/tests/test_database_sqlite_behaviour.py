"""Lease semantics that need no server: checked on a real SQLite file."""

from __future__ import annotations

import re
import sqlite3
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from firefly_scheduling import ConfigurationError, LockBackendError
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_database.protocol import lease_sql_for
from firefly_scheduling_database.schema import LeaseTables

TABLES = LeaseTables.named("locks")
# Real dialects (engines connect lazily; port 1 is never contacted).
MYSQL = lease_sql_for(lock_engine("mysql://root@127.0.0.1:1/test").dialect, TABLES)
SQLITE = lease_sql_for(lock_engine("sqlite:///unused.sqlite").dialect, TABLES)
lock_names = st.text(min_size=1, max_size=255).filter(lambda name: "\x00" not in name)


@pytest.fixture(scope="module")
def sqlite_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'locks.sqlite'}"
        installer = DatabaseLeaseLock(url)
        installer.install()
        installer.close()
        yield url


@pytest.fixture(scope="module")
def pair(sqlite_url: str) -> Iterator[tuple[DatabaseLeaseLock, DatabaseLeaseLock]]:
    first, second = DatabaseLeaseLock(sqlite_url), DatabaseLeaseLock(sqlite_url)
    yield first, second
    first.close()
    second.close()


@settings(max_examples=150, deadline=None)
@given(name=lock_names, other=lock_names)
def test_a_name_excludes_itself_and_nothing_else(
    pair: tuple[DatabaseLeaseLock, DatabaseLeaseLock], name: str, other: str
) -> None:
    first, second = pair
    assert first.try_acquire(name, 30)
    try:
        assert second.try_acquire(name, 30) is False
        if other != name:
            assert second.try_acquire(other, 30), f"{other!r} merged with {name!r}"
            second.release(other)
    finally:
        first.release(name)


def test_the_row_holds_the_exact_name_and_a_token(
    pair: tuple[DatabaseLeaseLock, DatabaseLeaseLock], sqlite_url: str
) -> None:
    first, _ = pair
    name = "Überprüfung 🔒 "
    assert first.try_acquire(name, 30)
    engine = lock_engine(sqlite_url)
    with engine.connect() as connection:
        rows = connection.execute(select(first.tables.locks)).all()
    engine.dispose()
    first.release(name)
    [(stored, owner, locked_until, locked_at)] = [row for row in rows if row[0] == name]
    assert stored == name
    assert len(owner) == 32
    assert locked_until - locked_at == timedelta(seconds=30)


@settings(max_examples=300)
@given(ttl=st.floats(min_value=1e-9, max_value=3e9, allow_nan=False, allow_infinity=False))
def test_ttl_rounding_never_shortens_a_lease(ttl: float) -> None:
    microseconds = MYSQL.ttl(ttl)
    assert microseconds >= 1
    assert 0 <= Fraction(microseconds, 1_000_000) - Fraction(ttl) < Fraction(1, 1_000_000)
    modifier = SQLITE.ttl(ttl)
    seconds = Fraction(modifier.removeprefix("+").removesuffix(" seconds"))
    assert 0 <= seconds - Fraction(ttl) < Fraction(1, 1000)


@given(name=lock_names)
def test_mysql_keys_are_the_exact_utf8_bytes_within_the_column(name: str) -> None:
    """The key is hex digits (what the statements send); `UNHEX` stores the name's bytes."""
    key = MYSQL.key(name)
    assert re.fullmatch(r"[0-9A-F]+", key), "only hex digits travel in the SQL text"
    assert bytes.fromhex(key).decode("utf-8") == name
    assert len(bytes.fromhex(key)) <= 1020


def test_a_missing_table_asks_for_migrate(sqlite_url: str) -> None:
    lock = DatabaseLeaseLock(sqlite_url, table="never_installed")
    with pytest.raises(ConfigurationError, match="firefly-scheduling migrate"):
        lock.try_acquire("job", 30)
    lock.close()


def test_install_is_idempotent(sqlite_url: str) -> None:
    lock = DatabaseLeaseLock(sqlite_url)
    lock.install()
    lock.install()
    assert lock.try_acquire("after-install", 30)
    lock.release("after-install")
    lock.close()


def test_a_lease_beyond_a_century_is_refused(
    pair: tuple[DatabaseLeaseLock, DatabaseLeaseLock],
) -> None:
    first, _ = pair
    with pytest.raises(ConfigurationError, match="century"):
        first.try_acquire("forever", 200 * 365 * 86_400)
    assert first.try_acquire("forever", 99 * 365 * 86_400)
    first.release("forever")


class TestBusyFile:
    """SQLite locks the whole FILE for a writer: "database is locked" says nothing about
    the row. Found by `benchmarks/claims.py` (32 writers on one file): an uncontended
    claim came back "not won", which every node would read as "claimed elsewhere",
    leaving the fire neither run nor recorded. It is an error for that call."""

    @pytest.fixture
    def busy_url(self, sqlite_url: str) -> Iterator[str]:
        path = sqlite_url.removeprefix("sqlite:///")
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # another process's write transaction
        try:
            yield f"{sqlite_url}?timeout=0.2"
        finally:
            writer.execute("ROLLBACK")
            writer.close()

    @pytest.mark.parametrize("operation", ["try_claim", "try_acquire"])
    def test_a_busy_file_is_an_error_not_a_lost_race(self, busy_url: str, operation: str) -> None:
        """A claim is not "claimed elsewhere", a task lock not "held elsewhere"."""
        lock = DatabaseLeaseLock(busy_url)
        try:
            with pytest.raises(LockBackendError, match="database is locked"):
                getattr(lock, operation)(f"busy:{operation}", 30)
        finally:
            lock.close()


def journal_mode(path: Path) -> str:
    """The journal mode stored in the file, read by a connection of the test's own."""
    with sqlite3.connect(path) as reader:
        mode: str = reader.execute("PRAGMA journal_mode").fetchone()[0]
    return mode


@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_the_locks_own_engine_puts_the_file_in_write_ahead_log_mode(
    tmp_path: Path, flavour: str
) -> None:
    """Each write is a transaction: in rollback-journal mode each commit took several
    fsyncs under the file's one write lock. WAL is stored in the file, so a second
    connection (and every other node's process) sees it."""
    path = tmp_path / "locks.sqlite"
    sqlite3.connect(path).close()
    assert journal_mode(path) == "delete", "SQLite's default, before any lock connects"
    url = f"sqlite:///{path}"
    if flavour == "sync":
        lock = DatabaseLeaseLock(url)
        lock.install()
        assert lock.try_acquire("wal", 30)
        lock.close()
    else:
        import asyncio  # noqa: PLC0415

        from firefly_scheduling_database import AsyncDatabaseLeaseLock  # noqa: PLC0415

        async def take() -> None:
            lock = AsyncDatabaseLeaseLock(url)
            await lock.install()
            assert await lock.try_acquire("wal", 30)
            await lock.aclose()

        asyncio.run(take())
    assert journal_mode(path) == "wal"


def test_the_run_historys_engine_puts_the_file_in_write_ahead_log_mode(tmp_path: Path) -> None:
    from firefly_scheduling_database.engine import release_store_engine, store_engine  # noqa: PLC0415

    path = tmp_path / "history.sqlite"
    sqlite3.connect(path).close()
    engine = store_engine(f"sqlite:///{path}")
    with engine.connect():
        pass
    release_store_engine(engine)
    assert journal_mode(path) == "wal"


def test_a_database_that_keeps_another_journal_mode_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SQLite answers the mode it kept when it cannot switch (an in-memory database
    here; the lock refuses those, but the answer is the same): the connection keeps
    working, and the slower writes are not a silent surprise."""
    from firefly_scheduling_database.engine import _write_ahead_log  # noqa: PLC0415

    connection = sqlite3.connect(":memory:")
    try:
        _write_ahead_log(connection, None)
        assert connection.execute("SELECT 1").fetchone() == (1,)
    finally:
        connection.close()
    assert "stays in journal mode 'memory', not 'wal'" in caplog.text


def test_journal_mode_keep_leaves_the_files_mode_alone(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    sqlite3.connect(path).close()
    lock = DatabaseLeaseLock(f"sqlite:///{path}?journal_mode=keep")
    lock.install()
    assert lock.try_acquire("kept", 30)
    lock.close()
    assert journal_mode(path) == "delete"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///locks.sqlite?journal_mode=off", "got journal_mode='off' in the URL"),
        (
            "postgresql://app:s3cret@db.internal/app?journal_mode=wal",
            "got journal_mode= in a postgresql URL",
        ),
    ],
)
def test_a_bad_journal_mode_is_refused_naming_it(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as refused:
        DatabaseLeaseLock(url)
    assert "s3cret" not in str(refused.value)
