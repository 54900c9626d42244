"""Both PostgreSQL providers talk UTF-8 to the server, whatever the environment says.

libpq takes its client encoding from the connection string, else from the
`PGCLIENTENCODING` environment variable, else from the server's defaults (the
database's encoding, a role's setting). A non-UTF-8 one cannot carry every valid
lock name: psycopg refused to encode `🔒` under LATIN1 and the acquisition raised a
bare `UnicodeEncodeError`. The providers now ask for UTF8 themselves, and refuse a
URL that asks for another encoding when the lock is built, naming the setting.
These cases set `PGCLIENTENCODING=LATIN1` for the test's process only.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from flavours import run_both_flavours
from fresh_tables import installed_lease_table

NAME = "lock 🔒 é"


@pytest.fixture
def latin1_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCLIENTENCODING", "LATIN1")


@pytest.fixture
def lease_table(postgres_url: str) -> Iterator[str]:
    with installed_lease_table(postgres_url, "ff_pgenc") as table:
        yield table


def _advisory_keys_held(postgres_url: str) -> set[int]:
    with psycopg.connect(postgres_url, client_encoding="UTF8") as reader:
        rows = reader.execute(
            "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks"
            " WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
        ).fetchall()
    return {value - (1 << 64) if value >= 1 << 63 else value for (value,) in rows}


@pytest.mark.usefixtures("latin1_environment")
def test_the_advisory_lock_speaks_utf8_under_a_latin1_environment(postgres_url: str) -> None:
    async def scenario(sync_lock: PgAdvisoryLock, async_lock: AsyncPgAdvisoryLock) -> None:
        assert await asyncio.to_thread(sync_lock.try_acquire_fenced, NAME, 30)
        assert await async_lock.try_acquire(NAME, 30) is False
        assert PgAdvisoryLock.key(NAME) in _advisory_keys_held(postgres_url)
        await asyncio.to_thread(sync_lock.release, NAME)
        assert await async_lock.try_acquire_fenced(NAME, 30)
        await async_lock.release(NAME)

    run_both_flavours(PgAdvisoryLock(postgres_url), AsyncPgAdvisoryLock(postgres_url), scenario)


@pytest.mark.usefixtures("latin1_environment")
def test_the_database_lock_speaks_utf8_under_a_latin1_environment(
    postgres_url: str, lease_table: str
) -> None:
    async def scenario(sync_lock: DatabaseLeaseLock, async_lock: AsyncDatabaseLeaseLock) -> None:
        assert await asyncio.to_thread(sync_lock.try_acquire, NAME, 30)
        assert await async_lock.try_acquire(NAME, 30) is False
        with psycopg.connect(postgres_url, client_encoding="UTF8") as reader:
            names = reader.execute(f"SELECT name FROM {lease_table}").fetchall()
        assert names == [(NAME,)]
        await asyncio.to_thread(sync_lock.release, NAME)
        assert await async_lock.try_acquire(NAME, 30)
        await async_lock.release(NAME)

    run_both_flavours(
        DatabaseLeaseLock(postgres_url, table=lease_table),
        AsyncDatabaseLeaseLock(postgres_url, table=lease_table),
        scenario,
    )


@pytest.mark.parametrize(
    "setting",
    ["client_encoding=SJIS", "options=-c%20client_encoding%3DLATIN1"],
    ids=["parameter", "options"],
)
@pytest.mark.parametrize(
    "lock_class",
    [PgAdvisoryLock, AsyncPgAdvisoryLock, DatabaseLeaseLock, AsyncDatabaseLeaseLock],
    ids=lambda cls: cls.__name__,
)
def test_a_url_asking_for_another_encoding_is_refused_when_the_lock_is_built(
    postgres_url: str, setting: str, lock_class: Callable[[str], object]
) -> None:
    url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}{setting}"
    with pytest.raises(ConfigurationError, match="client_encoding"):
        lock_class(url)
