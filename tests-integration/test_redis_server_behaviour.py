"""RedisLock on the shared Redis: what it writes, how many round trips, pitfalls of clients.

Each test uses names of its own and touches only the keys of those names.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from firefly_scheduling_redis import RedisLock

HEX_TOKEN_LENGTH = 32


class RecordingRedis(redis.Redis):
    """A real client that also records the name of every command it sends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.commands.append(str(args[0]).upper())
        # redis-py leaves execute_command unannotated.
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


@pytest.fixture
def name() -> str:
    return f"redis-behaviour:{uuid.uuid4().hex}"


@pytest.fixture
def lock(redis_url: str) -> Iterator[RedisLock]:
    made = RedisLock(redis_url)
    yield made
    made.close()


def test_a_held_lock_is_the_prefixed_key_holding_a_token_with_a_millisecond_ttl(
    lock: RedisLock, redis_client: redis.Redis, name: str
) -> None:
    assert lock.try_acquire(name, 9.0001)
    value = redis_client.get(f"firefly:scheduling:lock:{name}")
    assert isinstance(value, bytes)
    assert len(value) == HEX_TOKEN_LENGTH
    # ceil(9.0001 * 1000) = 9001 ms, counted down by the server from the moment of SET.
    assert 8000 < redis_client.pttl(f"firefly:scheduling:lock:{name}") <= 9001
    lock.release(name)
    assert redis_client.exists(f"firefly:scheduling:lock:{name}") == 0


def test_any_name_is_used_verbatim_as_utf8(lock: RedisLock, redis_client: redis.Redis) -> None:
    name = f"two words\nand a newline, ümlauts, 日本語 {uuid.uuid4().hex}"
    assert lock.try_acquire(name, 30)
    assert redis_client.exists(("firefly:scheduling:lock:" + name).encode()) == 1
    lock.release(name)


def test_release_leaves_a_key_holding_another_token(
    lock: RedisLock, redis_client: redis.Redis, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert lock.try_acquire(name, 30)
    # As if the lease had expired and another node had taken the name.
    redis_client.set(RedisLock.key(name), "another-node-token", keepttl=True)
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling.locks"):
        lock.release(name)
    assert redis_client.get(RedisLock.key(name)) == b"another-node-token"
    assert "lost before release" in caplog.text
    redis_client.delete(RedisLock.key(name))


def test_renew_resets_the_ttl_on_the_server(
    lock: RedisLock, redis_client: redis.Redis, name: str
) -> None:
    assert lock.try_acquire(name, 1)
    assert lock.renew(name, 60)
    assert redis_client.pttl(RedisLock.key(name)) > 50_000
    lock.release(name)


def test_renew_of_a_key_holding_another_token_fails_and_marks_the_lock_lost(
    lock: RedisLock, redis_client: redis.Redis, name: str
) -> None:
    assert lock.try_acquire(name, 30)
    redis_client.set(RedisLock.key(name), "another-node-token", keepttl=True)
    assert lock.renew(name, 30) is False
    assert lock.is_lost(name)
    assert redis_client.get(RedisLock.key(name)) == b"another-node-token"
    redis_client.delete(RedisLock.key(name))


def test_each_operation_is_one_command(redis_url: str, name: str) -> None:
    client = RecordingRedis(connection_pool=redis.ConnectionPool.from_url(redis_url))
    lock = RedisLock(client)
    # The first script calls may also load the scripts (NOSCRIPT, SCRIPT LOAD).
    assert lock.try_acquire_fenced(name + ":warm-up", 30)
    assert lock.renew(name + ":warm-up", 30)
    lock.release(name + ":warm-up")

    actions: list[tuple[str, Callable[[], object]]] = [
        ("acquire", lambda: lock.try_acquire(name, 30)),
        ("renew", lambda: lock.renew(name, 30)),
        ("release", lambda: lock.release(name)),
        ("fenced acquire", lambda: lock.try_acquire_fenced(name, 30)),
        ("release", lambda: lock.release(name)),
    ]
    steps: list[tuple[str, list[str]]] = []
    for step, action in actions:
        client.commands.clear()
        assert action() is not False
        steps.append((step, list(client.commands)))
    assert steps == [
        ("acquire", ["SET"]),
        ("renew", ["EVALSHA"]),
        ("release", ["EVALSHA"]),
        ("fenced acquire", ["EVALSHA"]),
        ("release", ["EVALSHA"]),
    ]
    client.close()


def test_a_refused_fenced_acquire_does_not_spend_a_token(
    redis_url: str, redis_client: redis.Redis, name: str
) -> None:
    holder, other = RedisLock(redis_url), RedisLock(redis_url)
    first = holder.try_acquire_fenced(name, 30)
    assert first is not None
    assert other.try_acquire_fenced(name, 30) is None
    assert int(redis_client.get(RedisLock.fence_key(name)) or 0) == first
    holder.release(name)
    assert other.try_acquire_fenced(name, 30) == first + 1
    other.release(name)


def test_the_fence_counter_never_expires(
    lock: RedisLock, redis_client: redis.Redis, name: str
) -> None:
    assert lock.try_acquire_fenced(name, 1)
    assert redis_client.ttl(RedisLock.fence_key(name)) == -1  # -1: exists, no expiry
    lock.release(name)
    redis_client.delete(RedisLock.fence_key(name))


def _still_held_renewed_and_released(lock: RedisLock, other: RedisLock, name: str) -> None:
    """`lock` holds `name`: `other` is refused, `lock` renews it, and its release frees it."""
    assert other.try_acquire(name, 30) is False
    assert lock.renew(name, 30)
    lock.release(name)
    assert other.try_acquire(name, 30)
    other.release(name)


def test_a_client_with_decoded_responses_works(redis_url: str, name: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    lock, other = RedisLock(client), RedisLock(redis_url)
    token = lock.try_acquire_fenced(name, 30)
    assert isinstance(token, int)
    _still_held_renewed_and_released(lock, other, name)
    client.close()


def test_a_connection_the_server_dropped_is_replaced_and_the_lease_survives(
    redis_url: str, redis_client: redis.Redis, name: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    lock, other = RedisLock(client), RedisLock(redis_url)
    assert lock.try_acquire(name, 30)
    # Kill only this test's own connection (the pool hands the same one back).
    assert redis_client.client_kill_filter(_id=str(client.client_id())) == 1
    # A lease lives in the key, not in the connection: the lock is still held, and the
    # holder's next call gets a fresh connection instead of an error.
    _still_held_renewed_and_released(lock, other, name)
    client.close()


def test_close_leaves_a_callers_client_open(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    RedisLock(client).close()
    assert client.ping() is True
    client.close()
