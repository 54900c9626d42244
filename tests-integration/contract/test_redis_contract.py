"""RedisLock and AsyncRedisLock against the shared contract, on a real Redis and a real
Redis Cluster (three masters; `scripts/ensure-servers` starts one). The hostile-name
cases read each name's key back with a redis-py client of their own."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
import redis

from firefly_scheduling.testing import AsyncLockContract, LockContract
from firefly_scheduling_redis import AsyncRedisLock, RedisLock
from firefly_scheduling_redis.protocol import release_channel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_readers import RedisReader

PASSWORD = "redis-contract-secret"


class _Server:
    @pytest.fixture
    def waiters_on_server(self, redis_url: str) -> Iterator[Callable[[str], int]]:
        """Subscribers to a name's release channel (`PUBSUB NUMSUB`), from a second client."""
        client = redis.Redis.from_url(redis_url)

        def count(name: str) -> int:
            channel = release_channel(name, cluster=False)
            return sum(int(subscribers) for _, subscribers in client.pubsub_numsub(channel))

        yield count
        client.close()

    @pytest.fixture
    def lease_dropper(self, redis_url: str) -> Iterator[Callable[[str], None]]:
        """Deletes a name's lease key from a second client, as an eviction would."""
        client = redis.Redis.from_url(redis_url)

        def drop(name: str) -> None:
            assert client.delete(RedisLock.key(name)) == 1, f"no lease key for {name!r}"

        yield drop
        client.close()

    @pytest.fixture
    def server_reader(self, redis_url: str) -> Iterator[RedisReader]:
        reader = RedisReader(redis_url)
        yield reader
        reader.close()


class _Cluster:
    @pytest.fixture
    def server_reader(self, redis_cluster_url: str) -> Iterator[RedisReader]:
        reader = RedisReader(redis_cluster_url)
        yield reader
        reader.close()


class TestRedisLockContract(_Server, LockContract):
    @pytest.fixture
    def lock_factory(self, redis_url: str) -> partial[RedisLock]:
        return partial(RedisLock, redis_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[RedisLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return RedisLock(f"redis://app:{PASSWORD}@127.0.0.1:1/0"), PASSWORD


class TestAsyncRedisLockContract(_Server, AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, redis_url: str) -> partial[AsyncRedisLock]:
        return partial(AsyncRedisLock, redis_url)

    @pytest.fixture
    def sync_lock_factory(self, redis_url: str) -> partial[RedisLock]:
        return partial(RedisLock, redis_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncRedisLock, str]:
        return AsyncRedisLock(f"redis://app:{PASSWORD}@127.0.0.1:1/0"), PASSWORD


class TestRedisClusterLockContract(_Cluster, LockContract):
    @pytest.fixture
    def lock_factory(self, redis_cluster_url: str) -> partial[RedisLock]:
        return partial(RedisLock, redis_cluster_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[RedisLock, str]:
        return RedisLock(f"redis+cluster://app:{PASSWORD}@127.0.0.1:1"), PASSWORD


class TestAsyncRedisClusterLockContract(_Cluster, AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, redis_cluster_url: str) -> partial[AsyncRedisLock]:
        return partial(AsyncRedisLock, redis_cluster_url)

    @pytest.fixture
    def sync_lock_factory(self, redis_cluster_url: str) -> partial[RedisLock]:
        return partial(RedisLock, redis_cluster_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncRedisLock, str]:
        return AsyncRedisLock(f"redis+cluster://app:{PASSWORD}@127.0.0.1:1"), PASSWORD
