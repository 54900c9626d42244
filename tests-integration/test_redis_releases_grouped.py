"""Redis releases waiting for one another go as one pipeline, each answered on its own.

A resident node ends the fires of an instant together, and one `EVALSHA` per release
was a third of a winning Redis node's CPU. The releases queue behind the
lock's sender (`send_as_one_group` holds it, as a group on the wire would) and are
then sent together (`RedisLock._release_together`). The evidence is the server's:

* its own counters: `INFO commandstats` counts one `EVALSHA` per release, and
  `INFO stats` counts the read events it processed, one per request that reached it:
  the twelve releases arrive in one (a few at most, should the kernel split it), not
  in twelve;
* a second client reading the keys: every released key is gone, and a key taken
  over by another owner keeps its new holder;
* a release whose key holds the wrong type gets its own error reply, and only that
  release fails; releases that find their script forgotten (NOSCRIPT) are sent again
  once it is loaded;
* on a 3-master cluster, the releases go as one pipeline per primary, each key gone.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import redis

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_redis import AsyncRedisLock, RedisLock, protocol
from firefly_scheduling_redis.url import parse_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grouped_senders import send_as_one_group

#: Counts or changes what the whole server does: runs alone under xdist.
pytestmark = pytest.mark.alone

COUNT = 12


@pytest.fixture
def lock(redis_url: str) -> Iterator[RedisLock]:
    made = RedisLock(redis_url)
    yield made
    made.close()


def _names(tag: str) -> list[str]:
    stamp = uuid.uuid4().hex
    return [f"grouped-release-{tag}-{stamp}-{index}" for index in range(COUNT)]


def _held(lock: RedisLock, names: list[str]) -> list[Holding]:
    holdings = lock.acquire_many([(name, 30) for name in names], fenced=True)
    assert all(isinstance(holding, Holding) for holding in holdings), holdings
    return [holding for holding in holdings if isinstance(holding, Holding)]


def _counters(client: redis.Redis) -> tuple[int, int]:
    """`EVALSHA` calls and read events the server processed so far."""
    commands = client.info("commandstats")
    reads = client.info("stats")["total_reads_processed"]
    return int(commands.get("cmdstat_evalsha", {}).get("calls", 0)), int(reads)


def test_waiting_releases_are_one_pipeline_each_answered(
    lock: RedisLock, redis_client: redis.Redis, redis_url: str
) -> None:
    names = _names("sync")
    holdings = _held(lock, names)
    redis_client.script_load(protocol.RELEASE.source)  # loaded, as on a server in use
    # The first key expires by hand and another lock takes it: its release must be
    # answered lost, and must leave the new holder's key alone.
    redis_client.delete(RedisLock.key(names[0]))
    other = RedisLock(redis_url)
    try:
        assert other.try_acquire(names[0], 30)
        taken = redis_client.get(RedisLock.key(names[0]))
        before: list[tuple[int, int]] = []
        send_as_one_group(
            lock._releases,
            [partial(lock.release_holding, holding) for holding in holdings],
            before_sending=lambda: before.append(_counters(redis_client)),
        )
        after = _counters(redis_client)
        [(scripts, reads)] = before
        assert after[0] - scripts == COUNT, "one RELEASE script per release"
        # The reader's own INFO calls are 2 of these reads; 12 requests would be 14.
        assert after[1] - reads <= 4, f"{after[1] - reads} reads: not one pipeline"
        assert holdings[0].lost
        assert not any(holding.lost for holding in holdings[1:])
        assert redis_client.exists(*[RedisLock.key(name) for name in names[1:]]) == 0
        assert redis_client.get(RedisLock.key(names[0])) == taken, (
            "the new holder's key was touched"
        )
        other.release(names[0])
    finally:
        other.close()


def test_a_group_that_finds_its_script_forgotten_loads_it_and_is_sent_once_more(
    lock: RedisLock, redis_client: redis.Redis
) -> None:
    """A restart without persistence or `SCRIPT FLUSH` empties the script cache: each
    release of the pipeline is refused unrun (NOSCRIPT), then sent again once loaded."""
    names = _names("noscript")
    holdings = _held(lock, names)
    redis_client.script_flush()
    send_as_one_group(
        lock._releases, [partial(lock.release_holding, holding) for holding in holdings]
    )
    assert redis_client.script_exists(protocol.RELEASE.sha) == [True]
    assert not any(holding.lost for holding in holdings)
    assert redis_client.exists(*[RedisLock.key(name) for name in names]) == 0


def test_a_release_refused_by_the_server_fails_alone(
    lock: RedisLock, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    names = _names("wrongtype")
    holdings = _held(lock, names)
    # The key of the first name now holds a hash: its script's GET fails (WRONGTYPE).
    key = RedisLock.key(names[0])
    redis_client.delete(key)
    redis_client.hset(key, "field", "value")
    try:
        send_as_one_group(
            lock._releases, [partial(lock.release_holding, holding) for holding in holdings]
        )
        assert redis_client.type(key) == b"hash", "the refused release changed the key"
        assert redis_client.exists(*[RedisLock.key(name) for name in names[1:]]) == 0
        assert not any(holding.lost for holding in holdings)
        failed = [
            record.getMessage()
            for record in caplog.records
            if "release failed" in record.getMessage()
        ]
        assert len(failed) == 1, failed
        assert names[0] in failed[0]
        assert "WRONGTYPE" in failed[0]
    finally:
        redis_client.delete(key)


def test_asyncio_waiting_releases_are_one_pipeline(
    redis_url: str, redis_client: redis.Redis
) -> None:
    names = _names("aio")
    redis_client.script_load(protocol.RELEASE.source)

    async def scenario() -> tuple[tuple[int, int], list[Holding]]:
        lock = AsyncRedisLock(redis_url)
        try:
            holdings = await lock.acquire_many([(name, 30) for name in names], fenced=True)
            held = [holding for holding in holdings if isinstance(holding, Holding)]
            assert len(held) == COUNT, holdings
            await lock._releases._sender.acquire()
            try:
                tasks = [asyncio.create_task(lock.release_holding(holding)) for holding in held]
                while len(lock._releases._queue) < COUNT:
                    await asyncio.sleep(0.005)
                before = _counters(redis_client)
            finally:
                lock._releases._sender.release()
            await asyncio.gather(*tasks)
            return before, held
        finally:
            await lock.aclose()

    (scripts, reads), held = asyncio.run(scenario())
    after = _counters(redis_client)
    assert after[0] - scripts == COUNT
    assert after[1] - reads <= 4, f"{after[1] - reads} reads: not one pipeline"
    assert not any(holding.lost for holding in held)
    assert redis_client.exists(*[AsyncRedisLock.key(name) for name in names]) == 0


def test_cluster_waiting_releases_go_one_pipeline_per_primary(redis_cluster_url: str) -> None:
    lock = RedisLock(redis_cluster_url)
    cluster = redis.cluster.RedisCluster.from_url(parse_url(redis_cluster_url).driver_url)
    try:
        names = _names("cluster")
        holdings = _held(lock, names)
        keys = [protocol.lock_key(name, cluster=True) for name in names]
        primaries = {cluster.get_node_from_key(key).name for key in keys}  # type: ignore[no-untyped-call]
        assert len(primaries) > 1, "the names should spread over the primaries"
        send_as_one_group(
            lock._releases, [partial(lock.release_holding, holding) for holding in holdings]
        )
        assert not any(holding.lost for holding in holdings)
        assert sum(int(cluster.exists(key)) for key in keys) == 0
    finally:
        cluster.close()
        lock.close()
