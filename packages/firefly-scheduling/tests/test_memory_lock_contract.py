"""InMemoryLock and NoneLock against the shared contract."""

from __future__ import annotations

import pytest

from firefly_scheduling import InMemoryLock, NoneLock
from firefly_scheduling.testing import LockContract, NoneLockContract


class TestInMemoryLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self) -> type[InMemoryLock]:
        return InMemoryLock


class TestNoneLockContract(NoneLockContract):
    @pytest.fixture
    def lock_factory(self) -> type[NoneLock]:
        return NoneLock
