"""RedisLock against the shared DistributedLock contract, on a real Redis."""

from __future__ import annotations

from functools import partial

import pytest

from firefly_scheduling.testing import LockContract
from firefly_scheduling_redis import RedisLock

PASSWORD = "redis-contract-secret"


class TestRedisLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self, redis_url: str) -> partial[RedisLock]:
        return partial(RedisLock, redis_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[RedisLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return RedisLock(f"redis://app:{PASSWORD}@127.0.0.1:1/0"), PASSWORD
