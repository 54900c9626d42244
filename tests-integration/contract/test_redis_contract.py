"""RedisLock and AsyncRedisLock against the shared contract, on a real Redis and a real
Redis Cluster (three masters; `scripts/ensure-servers` starts one)."""

from __future__ import annotations

from functools import partial

import pytest

from firefly_scheduling.testing import AsyncLockContract, LockContract
from firefly_scheduling_redis import AsyncRedisLock, RedisLock

PASSWORD = "redis-contract-secret"


class TestRedisLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self, redis_url: str) -> partial[RedisLock]:
        return partial(RedisLock, redis_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[RedisLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return RedisLock(f"redis://app:{PASSWORD}@127.0.0.1:1/0"), PASSWORD


class TestAsyncRedisLockContract(AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, redis_url: str) -> partial[AsyncRedisLock]:
        return partial(AsyncRedisLock, redis_url)

    @pytest.fixture
    def sync_lock_factory(self, redis_url: str) -> partial[RedisLock]:
        return partial(RedisLock, redis_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncRedisLock, str]:
        return AsyncRedisLock(f"redis://app:{PASSWORD}@127.0.0.1:1/0"), PASSWORD


class TestRedisClusterLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self, redis_cluster_url: str) -> partial[RedisLock]:
        return partial(RedisLock, redis_cluster_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[RedisLock, str]:
        return RedisLock(f"redis+cluster://app:{PASSWORD}@127.0.0.1:1"), PASSWORD


class TestAsyncRedisClusterLockContract(AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, redis_cluster_url: str) -> partial[AsyncRedisLock]:
        return partial(AsyncRedisLock, redis_cluster_url)

    @pytest.fixture
    def sync_lock_factory(self, redis_cluster_url: str) -> partial[RedisLock]:
        return partial(RedisLock, redis_cluster_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncRedisLock, str]:
        return AsyncRedisLock(f"redis+cluster://app:{PASSWORD}@127.0.0.1:1"), PASSWORD
