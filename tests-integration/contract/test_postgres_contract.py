"""PgAdvisoryLock and AsyncPgAdvisoryLock against the shared contract, on a real PostgreSQL."""

from __future__ import annotations

from functools import partial

import pytest

from firefly_scheduling.testing import AsyncLockContract, LockContract
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock

PASSWORD = "pg-contract-secret"


class TestPgAdvisoryLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self, postgres_url: str) -> partial[PgAdvisoryLock]:
        return partial(PgAdvisoryLock, postgres_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[PgAdvisoryLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return PgAdvisoryLock(f"postgresql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD


class TestAsyncPgAdvisoryLockContract(AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, postgres_url: str) -> partial[AsyncPgAdvisoryLock]:
        return partial(AsyncPgAdvisoryLock, postgres_url)

    @pytest.fixture
    def sync_lock_factory(self, postgres_url: str) -> partial[PgAdvisoryLock]:
        return partial(PgAdvisoryLock, postgres_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncPgAdvisoryLock, str]:
        return AsyncPgAdvisoryLock(f"postgresql://app:{PASSWORD}@127.0.0.1:1/app"), PASSWORD
