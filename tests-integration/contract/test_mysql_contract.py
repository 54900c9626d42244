"""MySqlNamedLock and AsyncMySqlNamedLock against the shared contract, on a real MySQL/MariaDB.

The hostile-name cases read each name's server lock back with `IS_USED_LOCK` on a
session of their own, and also run on sessions whose settings change how SQL text is
read (`session_settings`, set through the lock's URL).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from firefly_scheduling.testing import (
    AsyncHostileNamesContract,
    AsyncLockContract,
    HostileNamesContract,
    LockContract,
)
from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # session_killers
from server_readers import NamedLockReader
from session_settings import MYSQL_SETTINGS, with_setting

from session_killers import Killer, mysql_killer

PASSWORD = "mysql-contract-secret"


class _Server:
    """The server's URL (a subclass may set its sessions up otherwise) and a reader."""

    @pytest.fixture
    def lease_dropper(self, mysql_url: str) -> Killer:
        """Ends the session holding a name, from a second client (`KILL`)."""
        return mysql_killer(mysql_url)

    @pytest.fixture
    def lock_url(self, mysql_url: str) -> str:
        return mysql_url

    @pytest.fixture
    def server_reader(self, mysql_url: str) -> Iterator[NamedLockReader]:
        reader = NamedLockReader(mysql_url)
        yield reader
        reader.close()

    @pytest.fixture
    def sync_lock_factory(self, lock_url: str) -> partial[MySqlNamedLock]:
        return partial(MySqlNamedLock, lock_url)


class _Locks(_Server):
    @pytest.fixture
    def lock_factory(self, lock_url: str) -> partial[MySqlNamedLock]:
        return partial(MySqlNamedLock, lock_url)


class _AsyncLocks(_Server):
    @pytest.fixture
    def lock_factory(self, lock_url: str) -> partial[AsyncMySqlNamedLock]:
        return partial(AsyncMySqlNamedLock, lock_url)


class _Settings:
    @pytest.fixture(params=sorted(MYSQL_SETTINGS))
    def lock_url(self, request: pytest.FixtureRequest, mysql_url: str) -> str:
        return with_setting(mysql_url, MYSQL_SETTINGS[request.param])


class TestMySqlNamedLockContract(_Locks, LockContract):
    @pytest.fixture
    def unreachable_lock(self) -> tuple[MySqlNamedLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return MySqlNamedLock(f"mysql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD


class TestAsyncMySqlNamedLockContract(_AsyncLocks, AsyncLockContract):
    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncMySqlNamedLock, str]:
        return AsyncMySqlNamedLock(f"mysql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD


class TestMySqlNamedLockSessionSettings(_Settings, _Locks, HostileNamesContract):
    pass


class TestAsyncMySqlNamedLockSessionSettings(_Settings, _AsyncLocks, AsyncHostileNamesContract):
    pass
