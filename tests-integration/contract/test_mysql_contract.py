"""MySqlNamedLock against the shared DistributedLock contract, on a real MySQL/MariaDB."""

from __future__ import annotations

from functools import partial

import pytest

from firefly_scheduling.testing import LockContract
from firefly_scheduling_mysql import MySqlNamedLock

PASSWORD = "mysql-contract-secret"


class TestMySqlNamedLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self, mysql_url: str) -> partial[MySqlNamedLock]:
        return partial(MySqlNamedLock, mysql_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[MySqlNamedLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return MySqlNamedLock(f"mysql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD
