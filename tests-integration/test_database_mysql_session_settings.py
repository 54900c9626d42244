"""The database lock on MariaDB sessions whose settings change how SQL text is read.

A session in `NO_BACKSLASH_ESCAPES` reads a backslash as an ordinary character, and
a session whose client character set is `gbk` reads a backslash after certain bytes
as the second byte of a character: a lock name escaped with backslashes, as a
driver escapes bytes whatever the session says, then ends its string literal early,
and the rest of the name runs as SQL. Each case here builds the lock on a URL whose
own settings say so, tries names written to break out of a literal, and reads the
result with a second, plain PyMySQL client on default settings: the canary table
still exists, and the lease table holds exactly the name's UTF-8 bytes. The last
case runs both flavours' every kind of acquisition and release under a session with
every sql_mode flag at once, and under each of the combined modes.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "contract"))
from session_settings import MySqlCanaryClient

from flavours import run_both_flavours

#: `SET SESSION sql_mode='NO_BACKSLASH_ESCAPES'`, run by the driver on every connection.
NO_BACKSLASH_ESCAPES = "init_command=SET%20SESSION%20sql_mode%3D%27NO_BACKSLASH_ESCAPES%27"


class _Server(MySqlCanaryClient):
    """The test's own client (default settings): a canary table and the lease table."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.table = f"ff_modes_{uuid.uuid4().hex[:12]}"

    def names(self) -> list[bytes]:
        """Every name the lease table holds, as the bytes stored."""
        return [bytes(row[0]) for row in self.execute(f"SELECT name FROM {self.table}")]

    def close(self, *tables: str) -> None:
        super().close(self.table, f"{self.table}_fences", f"{self.table}_queue", *tables)


def _on_both_flavours(
    server: _Server,
    url: str,
    scenario: Callable[[DatabaseLeaseLock, AsyncDatabaseLeaseLock], Awaitable[None]],
) -> None:
    """`scenario` on both flavours' locks of `url` on the server's table; the canary stands."""
    run_both_flavours(
        DatabaseLeaseLock(url, table=server.table),
        AsyncDatabaseLeaseLock(url, table=server.table),
        scenario,
    )
    assert server.canary_stands()


@pytest.fixture
def server(mysql_url: str) -> Iterator[_Server]:
    client = _Server(mysql_url)
    installer = DatabaseLeaseLock(mysql_url, table=client.table)
    installer.install()
    installer.close()
    try:
        yield client
    finally:
        client.close()


def _with(url: str, parameter: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{parameter}"


def _breakout(server: _Server, prefix: str = "x") -> str:
    """A name that, read with the wrong escaping, ends the literal and drops the canary."""
    return f"{prefix}', 0x6f, NOW(), NOW()); DROP TABLE {server.canary}; -- "


def _names_while_held(server: _Server, url: str, name: str, *, asynchronous: bool) -> list[bytes]:
    """Acquire `name` with a lock on `url` (which must win); the names the table holds then."""
    if not asynchronous:
        lock = DatabaseLeaseLock(url, table=server.table)
        try:
            assert lock.try_acquire(name, 30) is True
            return server.names()
        finally:
            lock.close()

    async def acquire() -> list[bytes]:
        lock = AsyncDatabaseLeaseLock(url, table=server.table)
        try:
            assert await lock.try_acquire(name, 30) is True
            return server.names()
        finally:
            await lock.aclose()

    return asyncio.run(acquire())


FLAVOURS = pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])


@FLAVOURS
def test_a_breakout_name_under_no_backslash_escapes_is_only_a_name(
    server: _Server, mysql_url: str, asynchronous: bool
) -> None:
    url = _with(mysql_url, NO_BACKSLASH_ESCAPES)
    name = _breakout(server)
    held = _names_while_held(server, url, name, asynchronous=asynchronous)
    assert server.canary_stands(), "the lock name ran as SQL and dropped the canary"
    assert held == [name.encode()]


@FLAVOURS
def test_a_breakout_name_under_the_gbk_charset_is_only_a_name(
    server: _Server, mysql_url: str, asynchronous: bool
) -> None:
    url = _with(mysql_url, "charset=gbk")
    name = _breakout(server, prefix="€")
    held = _names_while_held(server, url, name, asynchronous=asynchronous)
    assert server.canary_stands(), "the lock name ran as SQL and dropped the canary"
    assert held == [name.encode()]


@pytest.mark.parametrize("name", ["a\\b", 'say "hi"'], ids=["backslash", "double-quotes"])
def test_sync_and_async_locks_exclude_each_other_under_no_backslash_escapes(
    server: _Server, mysql_url: str, name: str
) -> None:
    url = _with(mysql_url, NO_BACKSLASH_ESCAPES)

    async def scenario(sync_lock: DatabaseLeaseLock, async_lock: AsyncDatabaseLeaseLock) -> None:
        assert await asyncio.to_thread(sync_lock.try_acquire, name, 30)
        assert await async_lock.try_acquire(name, 30) is False, "two holders of one name"
        assert server.names() == [name.encode()]
        await asyncio.to_thread(sync_lock.release, name)
        assert server.names() == []
        assert await async_lock.try_acquire(name, 30)
        assert await asyncio.to_thread(sync_lock.try_acquire, name, 30) is False, (
            "two holders of one name"
        )
        assert server.names() == [name.encode()]
        await async_lock.release(name)
        assert server.names() == []

    _on_both_flavours(server, url, scenario)


#: Every sql_mode flag of MariaDB 10.11 and MySQL 8 that is not a combination, at once.
EVERY_FLAG = (
    "REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,IGNORE_BAD_TABLE_OPTIONS,"
    "ONLY_FULL_GROUP_BY,NO_UNSIGNED_SUBTRACTION,NO_DIR_IN_CREATE,NO_KEY_OPTIONS,"
    "NO_TABLE_OPTIONS,NO_FIELD_OPTIONS,NO_AUTO_VALUE_ON_ZERO,NO_BACKSLASH_ESCAPES,"
    "STRICT_TRANS_TABLES,STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ALLOW_INVALID_DATES,"
    "ERROR_FOR_DIVISION_BY_ZERO,HIGH_NOT_PRECEDENCE,NO_ENGINE_SUBSTITUTION,"
    "PAD_CHAR_TO_FULL_LENGTH,EMPTY_STRING_IS_NULL,SIMULTANEOUS_ASSIGNMENT,TIME_ROUND_FRACTIONAL"
)
#: The combinations, each of which also changes the parser or the type names.
COMBINATIONS = ("ANSI", "TRADITIONAL", "ORACLE", "MSSQL", "DB2", "POSTGRESQL", "MAXDB")


@pytest.mark.parametrize("sql_mode", [EVERY_FLAG, *COMBINATIONS], ids=["every-flag", *COMBINATIONS])
def test_every_sql_mode_keeps_names_exact_and_exclusive(
    server: _Server, mysql_url: str, sql_mode: str
) -> None:
    """Both flavours, single, fenced and batch acquisitions and grouped releases, on a
    session in `sql_mode` (MariaDB's only; a flag MySQL lacks is refused by it)."""
    if not server.execute("SELECT VERSION() LIKE %s", ("%MariaDB%",))[0][0]:
        pytest.skip("these sql_mode values are MariaDB's")
    setting = quote(f"SET SESSION sql_mode = '{sql_mode}'")
    url = _with(mysql_url, f"init_command={setting}")
    names = [_breakout(server), _breakout(server, prefix="€"), "a\\b", 'say "hi"']

    async def scenario(sync_lock: DatabaseLeaseLock, async_lock: AsyncDatabaseLeaseLock) -> None:
        for name in names:
            assert await async_lock.try_acquire_fenced(name, 30)
            assert await asyncio.to_thread(sync_lock.try_acquire, name, 30) is False
            assert server.names() == [name.encode()]
            await async_lock.release(name)
        held = await async_lock.acquire_many([(name, 30) for name in names], fenced=True)
        assert all(isinstance(holding, Holding) for holding in held), held
        assert sorted(server.names()) == sorted(name.encode() for name in names)
        holdings = [holding for holding in held if isinstance(holding, Holding)]
        await asyncio.gather(*(async_lock.release_holding(h) for h in holdings))
        assert server.names() == []
        for name in names:
            assert await asyncio.to_thread(sync_lock.try_acquire_fenced, name, 30)
            assert await async_lock.try_acquire(name, 30) is False
            await asyncio.to_thread(sync_lock.release, name)
        assert server.names() == []

    _on_both_flavours(server, url, scenario)
