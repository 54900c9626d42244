"""`fenced_set` and `afenced_set` on a real Redis server and a real Redis Cluster.

Every outcome is read back by a second client. The guarded key is one hash (`value`
and `fence_token` fields), so on the cluster it needs no hash tag: the tests spread
keys over every master to show the script runs wherever the key lives.
"""

from __future__ import annotations

import asyncio
import random
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import redis.cluster

from firefly_scheduling.fencing import FencingTokenError, afenced_set, fenced_set
from firefly_scheduling.fencing.redis_script import FENCED_SET_SHA
from firefly_scheduling.testing.local_server import LocalServer
from firefly_scheduling_redis.url import parse_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
from private_servers import redis_server
from threads_together import run_together

Client = redis.Redis | redis.cluster.RedisCluster


@pytest.fixture(params=["redis", "cluster"])
def connect(request: pytest.FixtureRequest) -> Iterator[Callable[[], Client]]:
    """A factory of independent clients of one server (or cluster), closed afterwards."""
    made: list[Client] = []
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")

        def make() -> Client:
            made.append(redis.Redis.from_url(url))
            return made[-1]
    else:
        url = parse_url(request.getfixturevalue("redis_cluster_url")).driver_url

        def make() -> Client:
            made.append(redis.cluster.RedisCluster.from_url(url))
            return made[-1]

    yield make
    for client in made:
        client.close()


def _key() -> str:
    return f"fencing-test:{uuid.uuid4().hex}"


@pytest.fixture
def key(connect: Callable[[], Client]) -> Iterator[str]:
    """A key no other run used, deleted afterwards."""
    fresh = _key()
    yield fresh
    connect().delete(fresh)


def _stored(client: Client, key: str) -> dict[bytes, bytes]:
    return client.hgetall(key)  # type: ignore[return-value]


def test_newer_and_equal_tokens_write_an_older_one_is_refused(
    connect: Callable[[], Client], key: str
) -> None:
    writer, reader = connect(), connect()
    assert fenced_set(writer, key, "five", 5)  # no key: any token, and it is stored
    assert _stored(reader, key) == {b"value": b"five", b"fence_token": b"5"}
    assert fenced_set(writer, key, "five again", 5)
    assert fenced_set(writer, key, b"seven", 7)
    assert not fenced_set(writer, key, "six", 6)
    assert not fenced_set(writer, key, "zero", 0)
    assert _stored(reader, key) == {b"value": b"seven", b"fence_token": b"7"}
    # Decimal strings compare by length first: 10 is newer than 9, not older.
    assert fenced_set(writer, key, 10, 10)
    assert not fenced_set(writer, key, 9.5, 9)
    assert _stored(reader, key) == {b"value": b"10", b"fence_token": b"10"}
    big = 2**63 - 1  # past a Lua double's exactness: compared exactly all the same
    assert fenced_set(writer, key, "big", big)
    assert not fenced_set(writer, key, "big - 1", big - 1)
    assert _stored(reader, key)[b"value"] == b"big"


def test_a_hash_without_a_token_takes_any_and_then_stores_it(
    connect: Callable[[], Client], key: str
) -> None:
    writer, reader = connect(), connect()
    reader.hset(key, "value", "written before fencing")
    assert fenced_set(writer, key, "fenced", 0)
    assert _stored(reader, key) == {b"value": b"fenced", b"fence_token": b"0"}


def test_a_key_of_another_type_fails_and_is_left_alone(
    connect: Callable[[], Client], key: str
) -> None:
    client = connect()
    client.set(key, "plain string")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        fenced_set(client, key, "v", 1)
    assert client.get(key) == b"plain string"


def test_the_asyncio_flavour(
    connect: Callable[[], Client], key: str, request: pytest.FixtureRequest
) -> None:
    reader = connect()
    cluster = isinstance(reader, redis.cluster.RedisCluster)

    async def scenario() -> list[bool]:
        client: redis.asyncio.Redis | redis.asyncio.RedisCluster
        if cluster:
            url = parse_url(request.getfixturevalue("redis_cluster_url")).driver_url
            client = redis.asyncio.RedisCluster.from_url(url)
        else:
            client = redis.asyncio.Redis.from_url(request.getfixturevalue("redis_url"))
        try:
            return [
                await afenced_set(client, key, "a", 3),
                await afenced_set(client, key, "b", 3),
                await afenced_set(client, key, "c", 2),
            ]
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == [True, True, False]
    assert _stored(reader, key) == {b"value": b"b", b"fence_token": b"3"}


def test_on_the_cluster_keys_on_every_master_are_guarded(redis_cluster_url: str) -> None:
    client = redis.cluster.RedisCluster.from_url(parse_url(redis_cluster_url).driver_url)
    keys = [_key() for _ in range(30)]
    try:
        for key in keys:
            assert fenced_set(client, key, "new", 2)
            assert not fenced_set(client, key, "old", 1)
            assert client.hget(key, "value") == b"new"
        masters = {client.get_node_from_key(key).name for key in keys}  # type: ignore[no-untyped-call]
        assert len(masters) == 3, f"30 keys should reach all three masters, got {masters}"
    finally:
        client.delete(*keys)
        client.close()


def test_concurrent_writers_with_interleaved_tokens_leave_the_highest_tokens_value(
    connect: Callable[[], Client], key: str
) -> None:
    """Six threads, each with its own client, write 120 tokens in a shuffled order."""
    tokens = list(range(1, 121))
    random.Random(20261207).shuffle(tokens)
    shares = [tokens[n::6] for n in range(6)]
    clients = [connect() for _ in shares]
    results: dict[int, bool] = {}

    def writer(client_and_share: tuple[Client, list[int]]) -> None:
        client, share = client_and_share
        for token in share:
            results[token] = fenced_set(client, key, f"v{token}", token)

    reader = connect()
    assert run_together(writer, list(zip(clients, shares, strict=True))) == []
    assert results[120] is True
    assert _stored(reader, key) == {b"value": b"v120", b"fence_token": b"120"}
    assert any(not written for written in results.values()), "no write was ever refused"


def test_bad_input_is_refused_naming_it_and_nothing_is_written(
    connect: Callable[[], Client],
) -> None:
    client = connect()
    key = _key()
    cases: list[tuple[Any, Any, Any, str]] = [
        (key, "v", None, "the fencing token is None (called outside a fire"),
        (key, "v", False, "must be an int, got False (bool)"),
        (key, "v", "3", "must be an int, got '3' (str)"),
        (key, "v", -2, "between 0 and"),
        (key, None, 3, "the value must be bytes, str, int or float, got NoneType"),
        (key, True, 3, "got bool"),
        ("", "v", 3, "the key must be a non-empty str or bytes"),
        (None, "v", 3, "the key must be a non-empty str or bytes, got None"),
    ]
    for bad_key, value, token, message in cases:
        with pytest.raises(FencingTokenError, match=r"^fenced_set: ") as raised:
            fenced_set(client, bad_key, value, token)
        assert message in str(raised.value)
    assert client.exists(key) == 0


def test_a_server_that_forgot_the_script_is_sent_it_again() -> None:
    """A private server: `SCRIPT FLUSH` (as after a restart) must not lose a write."""
    with LocalServer(redis_server()) as server:
        client = redis.Redis(port=server.port)
        try:
            assert fenced_set(client, "k", "one", 1)
            client.script_flush()
            assert client.script_exists(FENCED_SET_SHA) == [False]
            assert fenced_set(client, "k", "two", 2)
            assert not fenced_set(client, "k", "stale", 1)
            assert client.hgetall("k") == {b"value": b"two", b"fence_token": b"2"}
        finally:
            client.close()
