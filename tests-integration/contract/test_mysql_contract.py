"""MySqlNamedLock and AsyncMySqlNamedLock against the shared contract, on a real MySQL/MariaDB."""

from __future__ import annotations

from functools import partial

import pytest

from firefly_scheduling.testing import AsyncLockContract, LockContract
from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock

PASSWORD = "mysql-contract-secret"


class TestMySqlNamedLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self, mysql_url: str) -> partial[MySqlNamedLock]:
        return partial(MySqlNamedLock, mysql_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[MySqlNamedLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return MySqlNamedLock(f"mysql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD


class TestAsyncMySqlNamedLockContract(AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, mysql_url: str) -> partial[AsyncMySqlNamedLock]:
        return partial(AsyncMySqlNamedLock, mysql_url)

    @pytest.fixture
    def sync_lock_factory(self, mysql_url: str) -> partial[MySqlNamedLock]:
        return partial(MySqlNamedLock, mysql_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncMySqlNamedLock, str]:
        return AsyncMySqlNamedLock(f"mysql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD
