"""`pool_size`: the bound on the connections of a Redis lock or anchor store built from a URL."""

from __future__ import annotations

import pytest
import redis

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_redis import AsyncRedisLock, RedisLock
from firefly_scheduling_redis.anchor_store import RedisAnchorStore

SECRET = "pool-size-secret"
URL = f"redis://app:{SECRET}@127.0.0.1:6379/0"


@pytest.mark.parametrize("kind", [RedisLock, AsyncRedisLock, RedisAnchorStore])
def test_the_default_is_four_and_the_url_or_the_argument_changes_it(kind: type) -> None:
    assert kind(URL).pool_size == 4
    assert kind(f"{URL}?pool_size=7").pool_size == 7
    assert kind(URL, pool_size=2).pool_size == 2
    assert kind("redis+cluster://127.0.0.1:7000?pool_size=3").pool_size == 3


def test_the_single_server_client_is_capped_at_the_bound() -> None:
    lock = RedisLock(f"{URL}?pool_size=3")
    assert lock._client is not None
    assert lock._client.connection_pool.max_connections == 3
    assert "pool_size" not in lock._client.connection_pool.connection_kwargs


@pytest.mark.parametrize("value", ["0", "-1", "four", "1.5", "", "٣"])
def test_a_bad_pool_size_in_the_url_is_refused_naming_it_without_the_password(
    value: str,
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        RedisLock(f"{URL}?pool_size={value}")
    message = str(raised.value)
    assert f"got {value!r}" in message
    assert "pool_size= of the redis URL" in message
    assert SECRET not in message


@pytest.mark.parametrize("value", [0, True, 2.0, "3"])
def test_a_bad_pool_size_argument_is_refused(value: object) -> None:
    with pytest.raises(ConfigurationError, match="the redis lock's pool_size argument"):
        RedisLock(URL, pool_size=value)  # type: ignore[arg-type]


def test_the_argument_and_the_url_must_agree() -> None:
    with pytest.raises(ConfigurationError) as raised:
        RedisLock(f"{URL}?pool_size=5", pool_size=2)
    assert "give one of them" in str(raised.value)
    assert SECRET not in str(raised.value)
    assert RedisLock(f"{URL}?pool_size=5", pool_size=5).pool_size == 5


def test_pool_size_twice_and_redis_pys_max_connections_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="twice"):
        RedisLock(f"{URL}?pool_size=2&pool_size=3")
    with pytest.raises(ConfigurationError, match="pool_size= instead"):
        RedisLock(f"{URL}?max_connections=10")


def test_a_client_of_your_own_keeps_its_own_bound() -> None:
    client = redis.Redis()
    try:
        assert RedisLock(client).pool_size is None
        with pytest.raises(ConfigurationError, match="a client of your own keeps its own pool"):
            RedisLock(client, pool_size=4)
    finally:
        client.close()
