"""InMemoryLock and NoneLock against the shared contract."""

from __future__ import annotations

import pytest

from firefly_scheduling import InMemoryLock, NoneLock
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.testing import AsyncLockContract, LockContract, NoneLockContract


class TestInMemoryLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self) -> type[InMemoryLock]:
        return InMemoryLock


class TestNoneLockContract(NoneLockContract):
    @pytest.fixture
    def lock_factory(self) -> type[NoneLock]:
        return NoneLock


class TestAsyncInMemoryLockContract(AsyncLockContract):
    @pytest.fixture
    def lock_factory(self) -> type[AsyncInMemoryLock]:
        return AsyncInMemoryLock

    @pytest.fixture
    def sync_lock_factory(self) -> type[InMemoryLock]:
        return InMemoryLock
