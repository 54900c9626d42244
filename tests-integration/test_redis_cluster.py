"""Both Redis lock flavours on a real 3-master Redis Cluster, checked by a second client.

The contract suite proves exclusion on the cluster; these tests prove where the keys
live: one hash tag per name, the lock and its fence counter in one slot, names spread
over every master, and user-built cluster clients of both flavours accepted.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio
from redis.crc import key_slot

from firefly_scheduling_redis import AsyncRedisLock, RedisLock, protocol
from firefly_scheduling_redis.url import parse_url


@pytest.fixture
def cluster(redis_cluster_url: str) -> Iterator[redis.cluster.RedisCluster]:
    client = redis.cluster.RedisCluster.from_url(parse_url(redis_cluster_url).driver_url)
    yield client
    client.close()


def _names(count: int) -> list[str]:
    run = uuid.uuid4().hex
    return [f"cluster-{run}-{n}" for n in range(count)]


def test_fenced_locks_on_every_master_keep_lock_and_counter_in_one_slot(
    redis_cluster_url: str, cluster: redis.cluster.RedisCluster
) -> None:
    lock = RedisLock(redis_cluster_url)
    names = _names(30)
    try:
        tokens = [lock.try_acquire_fenced(name, 30) for name in names]
        assert all(token == 1 for token in tokens)
        owners = set()
        for name in names:
            key, fence = (
                protocol.lock_key(name, cluster=True),
                protocol.fence_key(name, cluster=True),
            )
            assert key_slot(key) == key_slot(fence)
            node = cluster.get_node_from_key(key)  # type: ignore[no-untyped-call]
            owners.add(node.name)
            assert cluster.get(fence) == b"1"
            assert 0 < cluster.pttl(key) <= 30_000
            # The single-server key form is not used on a cluster.
            assert cluster.exists(RedisLock.key(name)) == 0
        assert len(owners) == 3, f"30 names should reach all three masters, got {owners}"
    finally:
        for name in names:
            lock.release(name)
        lock.close()
    assert all(cluster.exists(protocol.lock_key(name, cluster=True)) == 0 for name in names)


def test_a_user_built_sync_cluster_client_is_used_and_left_open(
    cluster: redis.cluster.RedisCluster,
) -> None:
    lock, other = RedisLock(cluster), RedisLock(cluster)
    name = _names(1)[0]
    assert repr(lock).startswith("RedisLock('redis+cluster://127.0.0.1:")
    assert lock.try_acquire(name, 30) is True
    assert other.try_acquire(name, 30) is False
    lock.release(name)
    lock.close()
    assert cluster.ping() is True  # still open


def test_a_user_built_asyncio_cluster_client_excludes_the_sync_flavour(
    redis_cluster_url: str,
) -> None:
    name = _names(1)[0]
    sync_lock = RedisLock(redis_cluster_url)

    async def race() -> tuple[int | None, bool, bool]:
        client = redis.asyncio.RedisCluster.from_url(parse_url(redis_cluster_url).driver_url)
        lock = AsyncRedisLock(client)
        try:
            token = await lock.try_acquire_fenced(name, 30)
            refused = sync_lock.try_acquire(name, 30)
            await lock.release(name)
            return token, refused, sync_lock.try_acquire(name, 30)
        finally:
            await lock.aclose()
            await client.aclose()

    try:
        assert asyncio.run(race()) == (1, False, True)
    finally:
        sync_lock.release(name)
        sync_lock.close()


@pytest.mark.parametrize("given_client", [False, True], ids=["from-url", "given-client"])
def test_a_hundred_coroutines_first_calls_on_a_fresh_async_cluster_lock_all_succeed(
    redis_cluster_url: str, given_client: bool
) -> None:
    # redis-py's asyncio cluster client reads the slot map on its first command; 100
    # first commands at once made some fail with "Connection closed by server" (and
    # "'NoneType' object has no attribute 'writelines'") until the lock initialised
    # the client once, under a lock, before sending anything.
    names = _names(100)

    async def race() -> list[bool | str]:
        client = None
        if given_client:
            client = redis.asyncio.RedisCluster.from_url(parse_url(redis_cluster_url).driver_url)
        lock = AsyncRedisLock(client if client is not None else redis_cluster_url)

        async def cycle(name: str) -> bool | str:
            try:
                won = await lock.try_acquire(name, 30)
                await lock.release(name)
            except Exception as err:  # noqa: BLE001 - collected and asserted below
                return f"{type(err).__name__}: {err}"
            return won

        try:
            return list(await asyncio.gather(*(cycle(name) for name in names)))
        finally:
            await lock.aclose()
            if client is not None:
                await client.aclose()

    outcomes = asyncio.run(race())
    assert [o for o in outcomes if o is not True] == []
