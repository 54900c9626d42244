"""Construction of `RedisLock`: URL kinds, clients, redaction, timeouts, the provider."""

from __future__ import annotations

from dataclasses import replace

import pytest
import redis
import redis.asyncio
from redis.sentinel import Sentinel

from firefly_scheduling import ConfigurationError, Settings
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling_redis import RedisLock
from firefly_scheduling_redis.client import describe_client
from firefly_scheduling_redis.url import CLIENT_DEFAULTS

SECRET = "s3cr3t-pw"


def create_lock(settings: Settings) -> object:
    """The lock the `redis` provider's descriptor builds from `settings`."""
    return resolve_lock(replace(settings, lock_provider="redis"))


def sentinel_client(service: str) -> redis.Redis:
    """A client of a Sentinel-managed primary (nothing connects until it is used)."""
    sentinel = Sentinel([("127.0.0.1", 1)])  # type: ignore[no-untyped-call]  # unannotated
    client: redis.Redis = sentinel.master_for(service, password=SECRET)  # type: ignore[no-untyped-call]
    return client


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@127.0.0.1:1/0",
        f"rediss://app:{SECRET}@127.0.0.1:1/2",
        f"unix://app:{SECRET}@/tmp/no-such-redis.sock?db=1",
        "REDIS://127.0.0.1:1",
    ],
)
def test_redis_url_kinds_are_accepted_without_connecting(url: str) -> None:
    # Port 1 is closed and the socket does not exist: construction must not connect.
    lock = RedisLock(url)
    assert lock.is_held("anything") is False
    assert SECRET not in repr(lock)


def test_url_option_redis_py_refuses_is_a_configuration_error_without_the_password() -> None:
    with pytest.raises(ConfigurationError, match="invalid URL") as caught:
        RedisLock(f"redis://:{SECRET}@127.0.0.1/0?socket_timeout=soon")
    assert SECRET not in str(caught.value)
    assert caught.value.__cause__ is None


def test_asyncio_client_is_refused_naming_its_type() -> None:
    client = redis.asyncio.Redis(host="127.0.0.1", port=1)
    with pytest.raises(ConfigurationError, match=r"asyncio .*redis\.asyncio\.client\.Redis"):
        RedisLock(client)  # type: ignore[arg-type]  # the point of the test


@pytest.mark.parametrize("not_a_client", [42, b"redis://127.0.0.1", object()])
def test_other_objects_are_refused_naming_their_type(not_a_client: object) -> None:
    with pytest.raises(ConfigurationError, match=type(not_a_client).__qualname__):
        RedisLock(not_a_client)  # type: ignore[arg-type]  # the point of the test


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"redis://:{SECRET}@cache.internal:6380/3",
            "RedisLock('redis://:***@cache.internal:6380/3')",
        ),
        (f"rediss://app:{SECRET}@cache/0", "RedisLock('rediss://app:***@cache/0')"),
        (f"redis://cache/0?password={SECRET}", "RedisLock('redis://cache/0?password=***')"),
    ],
)
def test_repr_shows_the_redacted_url(url: str, shown: str) -> None:
    assert repr(RedisLock(url)) == shown


@pytest.mark.parametrize(
    ("client", "shown"),
    [
        (redis.Redis(host="cache", port=6380, db=2, password=SECRET), "redis://cache:6380/2"),
        (redis.Redis(host="cache", ssl=True, password=SECRET), "rediss://cache:6379/0"),
        (redis.Redis(unix_socket_path="/run/redis.sock", db=1), "unix:///run/redis.sock?db=1"),
        (sentinel_client("orders"), "sentinel master 'orders', db 0"),
    ],
)
def test_a_client_is_described_by_host_port_and_db_only(client: redis.Redis, shown: str) -> None:
    assert describe_client(client) == shown
    assert repr(RedisLock(client)) == f"RedisLock({shown!r})"


def test_a_client_built_from_a_url_has_bounded_timeouts_and_no_retries() -> None:
    lock = RedisLock("redis://127.0.0.1:1/0")
    options = lock._client.connection_pool.connection_kwargs
    for option, seconds in CLIENT_DEFAULTS.items():
        assert options[option] == seconds
    assert options["retry"].get_retries() == 0


def test_timeouts_in_the_url_win_over_the_defaults() -> None:
    lock = RedisLock("redis://127.0.0.1:1/0?socket_timeout=0.5")
    assert lock._client.connection_pool.connection_kwargs["socket_timeout"] == 0.5


def test_keys_carry_the_prefix_and_the_name_as_utf8() -> None:
    assert RedisLock.key("report") == b"firefly:scheduling:lock:report"
    assert RedisLock.key("überprüfung 日本") == "firefly:scheduling:lock:überprüfung 日本".encode()
    assert RedisLock.fence_key("report") == b"firefly:scheduling:fence:report"


def test_provider_falls_back_to_redis_url_then_the_local_server() -> None:
    assert repr(create_lock(Settings.from_env({"REDIS_URL": "redis://cache/4"}))) == (
        "RedisLock('redis://cache/4')"
    )
    assert repr(create_lock(Settings.from_env({}))) == "RedisLock('redis://127.0.0.1:6379/0')"


def test_a_name_that_is_not_valid_text_is_refused() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        RedisLock.key("lone \ud800 surrogate")
