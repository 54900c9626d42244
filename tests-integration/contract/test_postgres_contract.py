"""PgAdvisoryLock and AsyncPgAdvisoryLock against the shared contract, on a real PostgreSQL.

The hostile-name cases read each name's advisory key back from `pg_locks` on a
session of their own, and also run on sessions whose settings change how SQL text is
read (`session_settings`, set through the lock's URL).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import psycopg
import pytest

from firefly_scheduling.testing import (
    AsyncHostileNamesContract,
    AsyncLockContract,
    HostileNamesContract,
    LockContract,
)
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # session_killers
from server_readers import AdvisoryLockReader
from session_settings import POSTGRES_SETTINGS, with_setting

from session_killers import Killer, pg_killer

PASSWORD = "pg-contract-secret"


class _Server:
    """The server's URL (a subclass may set its sessions up otherwise) and a reader."""

    @pytest.fixture
    def lock_url(self, postgres_url: str) -> str:
        return postgres_url

    @pytest.fixture
    def server_reader(self, postgres_url: str) -> Iterator[AdvisoryLockReader]:
        reader = AdvisoryLockReader(postgres_url)
        yield reader
        reader.close()

    @pytest.fixture
    def waiters_on_server(self, postgres_url: str) -> Iterator[Callable[[str], int]]:
        """Sessions queued for a name's advisory lock (`pg_locks`, not granted), read on a
        session of its own."""
        connection = psycopg.connect(postgres_url, autocommit=True)

        def count(name: str) -> int:
            key = PgAdvisoryLock.key(name) & 0xFFFF_FFFF_FFFF_FFFF  # as the server splits it
            row = connection.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND classid = %s::oid AND objid = %s::oid",
                (key >> 32, key & 0xFFFF_FFFF),
            ).fetchone()
            assert row is not None
            return int(row[0])

        yield count
        connection.close()

    @pytest.fixture
    def lease_dropper(self, postgres_url: str) -> Killer:
        """Ends the session holding a name, from a second client (`pg_terminate_backend`)."""
        return pg_killer(postgres_url)

    @pytest.fixture
    def sync_lock_factory(self, lock_url: str) -> partial[PgAdvisoryLock]:
        return partial(PgAdvisoryLock, lock_url)


class _Locks(_Server):
    @pytest.fixture
    def lock_factory(self, lock_url: str) -> partial[PgAdvisoryLock]:
        return partial(PgAdvisoryLock, lock_url)


class _AsyncLocks(_Server):
    @pytest.fixture
    def lock_factory(self, lock_url: str) -> partial[AsyncPgAdvisoryLock]:
        return partial(AsyncPgAdvisoryLock, lock_url)


class _Settings:
    @pytest.fixture(params=sorted(POSTGRES_SETTINGS))
    def lock_url(self, request: pytest.FixtureRequest, postgres_url: str) -> str:
        return with_setting(postgres_url, POSTGRES_SETTINGS[request.param])


class TestPgAdvisoryLockContract(_Locks, LockContract):
    @pytest.fixture
    def unreachable_lock(self) -> tuple[PgAdvisoryLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return PgAdvisoryLock(f"postgresql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD


class TestAsyncPgAdvisoryLockContract(_AsyncLocks, AsyncLockContract):
    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncPgAdvisoryLock, str]:
        return AsyncPgAdvisoryLock(f"postgresql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD


class TestPgAdvisoryLockSessionSettings(_Settings, _Locks, HostileNamesContract):
    pass


class TestAsyncPgAdvisoryLockSessionSettings(_Settings, _AsyncLocks, AsyncHostileNamesContract):
    pass
