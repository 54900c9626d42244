"""Both flavours and Redis Cluster, at construction: URLs, clients, keys, redaction.

Nothing here connects (port 1 is closed); the behaviour on real servers, a real
cluster included, is the contract suite's job (tests-integration/contract).
"""

from __future__ import annotations

import pytest
import redis
import redis.asyncio
from redis.crc import key_slot

from firefly_scheduling import ConfigurationError
from firefly_scheduling_redis import AsyncRedisLock, RedisLock, protocol, waiter_queue
from firefly_scheduling_redis.client import describe_client

SECRET = "s3cr3t-pw"
FLAVOURS = (RedisLock, AsyncRedisLock)


@pytest.mark.parametrize("lock_class", FLAVOURS)
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis+cluster://:{SECRET}@127.0.0.1:1", "redis+cluster://:***@127.0.0.1:1"),
        (f"rediss+cluster://app:{SECRET}@node:7000", "rediss+cluster://app:***@node:7000"),
        ("REDIS+CLUSTER://127.0.0.1:1/0", "REDIS+CLUSTER://127.0.0.1:1/0"),
    ],
)
def test_a_cluster_url_is_accepted_without_connecting_and_shown_redacted(
    lock_class: type[RedisLock | AsyncRedisLock], url: str, shown: str
) -> None:
    # redis-py's synchronous RedisCluster connects when it is built; the lock builds
    # it on first use, so an unreachable cluster does not fail construction.
    lock = lock_class(url)
    assert repr(lock) == f"{lock_class.__name__}({shown!r})"
    assert lock._client is None


@pytest.mark.parametrize("lock_class", FLAVOURS)
@pytest.mark.parametrize("url", ["redis+cluster://127.0.0.1:1/3", "redis+cluster://h:1/?db=2"])
def test_a_cluster_url_with_another_database_is_refused(
    lock_class: type[RedisLock | AsyncRedisLock], url: str
) -> None:
    with pytest.raises(ConfigurationError, match="database 0 only"):
        lock_class(url)


@pytest.mark.parametrize("lock_class", FLAVOURS)
@pytest.mark.parametrize("scheme", ["redis", "redis+cluster"])
def test_a_bad_query_option_is_refused_at_construction_without_the_password(
    lock_class: type[RedisLock | AsyncRedisLock], scheme: str
) -> None:
    with pytest.raises(ConfigurationError, match="invalid URL") as caught:
        lock_class(f"{scheme}://:{SECRET}@127.0.0.1:1/0?socket_timeout=soon")
    assert SECRET not in str(caught.value)
    assert caught.value.__cause__ is None


@pytest.mark.parametrize("url", ["redis+sentinel://h:1", "memcached://h:1", "redis-cluster://h"])
def test_other_schemes_are_refused_by_the_async_lock_naming_the_scheme(url: str) -> None:
    with pytest.raises(ConfigurationError, match="cannot use a"):
        AsyncRedisLock(url)


@pytest.mark.parametrize(
    "client",
    [redis.Redis(host="127.0.0.1", port=1), redis.Redis(host="127.0.0.1", port=1, db=2)],
)
def test_the_async_lock_refuses_a_synchronous_client_naming_its_type(
    client: redis.Redis,
) -> None:
    with pytest.raises(ConfigurationError, match=r"asyncio client, got the synchronous redis\."):
        AsyncRedisLock(client)  # type: ignore[arg-type]  # the point of the test


def test_the_sync_lock_refuses_an_asyncio_cluster_client_naming_its_type() -> None:
    client = redis.asyncio.RedisCluster(host="127.0.0.1", port=1)
    with pytest.raises(ConfigurationError, match=r"asyncio redis\.asyncio\.cluster\.RedisCluster"):
        RedisLock(client)  # type: ignore[arg-type]  # the point of the test


@pytest.mark.parametrize("not_a_client", [42, b"redis://127.0.0.1", object()])
def test_the_async_lock_refuses_other_objects_naming_their_type(not_a_client: object) -> None:
    with pytest.raises(ConfigurationError, match=type(not_a_client).__qualname__):
        AsyncRedisLock(not_a_client)  # type: ignore[arg-type]  # the point of the test


def test_an_asyncio_cluster_client_is_described_without_its_password() -> None:
    client = redis.asyncio.RedisCluster(host="node-a", port=7000, password=SECRET)
    assert describe_client(client) == "redis+cluster://node-a:7000"
    lock = AsyncRedisLock(client)
    assert repr(lock) == "AsyncRedisLock('redis+cluster://node-a:7000')"
    assert lock._secrets == (SECRET,)
    assert lock._cluster is True


def test_an_asyncio_single_server_client_is_described_like_the_sync_one() -> None:
    client = redis.asyncio.Redis(host="cache", port=6380, db=2, password=SECRET)
    assert repr(AsyncRedisLock(client)) == "AsyncRedisLock('redis://cache:6380/2')"
    tls = redis.asyncio.Redis(host="cache", ssl=True)
    assert describe_client(tls) == "rediss://cache:6379/0"


def test_single_server_keys_are_unchanged_by_cluster_support() -> None:
    assert protocol.lock_key("report", cluster=False) == b"firefly:scheduling:lock:report"
    assert protocol.fence_key("report", cluster=False) == b"firefly:scheduling:fence:report"
    assert AsyncRedisLock.key("report") == RedisLock.key("report")


@pytest.mark.parametrize(
    "name",
    ["report", "}starts-with-a-brace", "{tag}inside", "a}b{c}", "überprüfung 日本", "x" * 255],
)
def test_cluster_keys_of_one_name_share_one_slot_whatever_the_name_holds(name: str) -> None:
    """The lock, its fence counter and its waiters' queue: the scripts touch them together."""
    keys = waiter_queue.acquire_in_turn_keys(name, cluster=True)
    assert keys[:2] == (
        protocol.lock_key(name, cluster=True),
        protocol.fence_key(name, cluster=True),
    )
    assert len(set(keys)) == 4
    assert {key_slot(key) for key in keys} == {key_slot(keys[0])}
    assert all(name.encode() in key for key in keys)


def test_cluster_keys_spread_names_over_slots() -> None:
    slots = {key_slot(protocol.lock_key(f"task-{n}", cluster=True)) for n in range(200)}
    # 200 names over 16,384 slots: a tag that ignored the name would give one slot.
    assert len(slots) > 150


@pytest.mark.parametrize(
    ("cluster", "channel"),
    [
        (False, b"firefly:scheduling:released:report"),
        (True, b"{firefly:scheduling:report}:released"),
    ],
)
def test_a_release_publishes_on_the_names_channel(cluster: bool, channel: bytes) -> None:
    """The waiters subscribe to the channel the release script is handed."""
    assert protocol.release_channel("report", cluster=cluster) == channel
    command = protocol.release("report", "owner", cluster=cluster)
    assert command.args[-1] == channel
    assert "publish" in protocol.RELEASE.source
