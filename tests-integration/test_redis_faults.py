"""RedisLock against a private Redis server that the tests restart and misconfigure.

The shared server is never stopped or reconfigured: every test here starts its own
`redis-server` (no persistence) on a free port. Its outages are the shared
`OutageContract`'s.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
import redis

from firefly_scheduling import LockBackendError
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.testing import OutageContract
from firefly_scheduling.testing.local_server import LocalServer
from firefly_scheduling_redis import RedisLock
from firefly_scheduling_redis.protocol import release_channel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from private_servers import redis_server

PASSWORD = "private-redis-secret"
NAME = "redis-faults:job"


@pytest.fixture
def private_server() -> Iterator[LocalServer]:
    with LocalServer(redis_server()) as server:
        yield server


@pytest.fixture
def admin(private_server: LocalServer) -> Iterator[redis.Redis]:
    client = redis.Redis(port=private_server.port)
    yield client
    client.close()


def url_of(server: LocalServer) -> str:
    return f"redis://127.0.0.1:{server.port}/0"


class TestRedisOutage(OutageContract):
    pytestmark = pytest.mark.slow
    restart_keeps_locks = False  # no persistence: a restart forgets every key

    @pytest.fixture
    def restartable_server(self, private_server: LocalServer) -> LocalServer:
        return private_server

    @pytest.fixture
    def lock_factory(self, private_server: LocalServer) -> partial[RedisLock]:
        return partial(RedisLock, url_of(private_server))


def test_scripts_are_loaded_again_after_the_server_forgot_them(
    private_server: LocalServer, admin: redis.Redis
) -> None:
    lock, other = RedisLock(url_of(private_server)), RedisLock(url_of(private_server))
    assert lock.try_acquire(NAME, 60)
    lock.release(NAME)  # the release script is now cached by the server...
    assert lock.try_acquire(NAME, 60)
    admin.script_flush()  # ...and forgotten, as after a restart or a failover
    lock.release(NAME)
    assert other.try_acquire(NAME, 60), "the release after SCRIPT FLUSH did not free the lock"
    other.release(NAME)


def test_a_read_only_replica_is_named_in_the_error(
    private_server: LocalServer, admin: redis.Redis
) -> None:
    # A replica of a primary that does not answer (port 1) is read-only all the same.
    admin.replicaof("127.0.0.1", 1)
    lock = RedisLock(url_of(private_server))
    with pytest.raises(LockBackendError, match="read-only replica; point it at the primary"):
        lock.try_acquire(NAME, 60)


def test_a_missing_acl_permission_is_named_without_the_password(
    private_server: LocalServer, admin: redis.Redis
) -> None:
    admin.acl_setuser(
        "locks", enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], commands=["+get"]
    )
    lock = RedisLock(f"redis://locks:{PASSWORD}@127.0.0.1:{private_server.port}/0")
    with pytest.raises(LockBackendError, match="lacks an ACL permission") as caught:
        lock.try_acquire(NAME, 60)
    assert PASSWORD not in str(caught.value)
    assert PASSWORD not in repr(lock)


def test_a_wrong_password_is_named_without_the_password(
    private_server: LocalServer, admin: redis.Redis
) -> None:
    admin.acl_setuser("locks", enabled=True, passwords=["+the-right-one"], keys=["*"])
    lock = RedisLock(f"redis://locks:{PASSWORD}@127.0.0.1:{private_server.port}/0")
    with pytest.raises(LockBackendError, match="check the user name and password") as caught:
        lock.try_acquire(NAME, 60)
    assert PASSWORD not in str(caught.value)


def test_a_full_server_under_noeviction_refuses_new_locks_loudly(
    private_server: LocalServer, admin: redis.Redis
) -> None:
    lock, holder = RedisLock(url_of(private_server)), RedisLock(url_of(private_server))
    assert holder.try_acquire(NAME + ":held", 60)
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)  # everything in use is now "too much"
    with pytest.raises(LockBackendError, match="maxmemory is reached"):
        lock.try_acquire(NAME, 60)
    # What is already held is kept, and can still be released (deletes are allowed).
    assert admin.exists(RedisLock.key(NAME + ":held")) == 1
    holder.release(NAME + ":held")
    assert admin.exists(RedisLock.key(NAME + ":held")) == 0


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["volatile-lru", "allkeys-lru"])
def test_an_evicting_policy_can_evict_a_held_lock(
    private_server: LocalServer, admin: redis.Redis, policy: str
) -> None:
    holder, other = RedisLock(url_of(private_server)), RedisLock(url_of(private_server))
    assert holder.try_acquire(NAME, 3600)
    # volatile-* evicts keys that have an expiry, and every lock key has one.
    admin.config_set("maxmemory-policy", policy)
    admin.config_set("maxmemory", int(admin.info("memory")["used_memory"]) + 1_000_000)
    # Redis's LRU clock ticks once a second: let the lock become the oldest key, as a
    # lock held by a long task is, rather than tie with the entries written below.
    time.sleep(1.1)
    for batch in range(40):  # about 4 MB of cache entries through a 1 MB headroom
        with admin.pipeline(transaction=False) as pipe:
            for entry in range(100):
                pipe.set(f"cache:{batch}:{entry}", b"x" * 1000, ex=3600)
            pipe.execute()
    # The documented pitfall: another node now wins a lock that is still held...
    assert other.try_acquire(NAME, 3600)
    # ...and the holder finds out at its next renewal.
    assert holder.renew(NAME, 3600) is False


def test_the_documented_acl_permissions_are_enough(
    private_server: LocalServer, admin: redis.Redis
) -> None:
    admin.acl_setuser(
        "locks",
        enabled=True,
        passwords=[f"+{PASSWORD}"],
        keys=["firefly:scheduling:*"],
        channels=["firefly:scheduling:*"],
        commands=[
            *("+get", "+set", "+del", "+pexpire", "+pttl", "+incr", "+evalsha", "+script|load"),
            *("+exists", "+pexpireat", "+time", "+zadd", "+zrem", "+zscore", "+zcard"),
            *("+zrange", "+zrangebyscore", "+zremrangebyscore"),
            *("+publish", "+subscribe"),
        ],
    )
    url = f"redis://locks:{PASSWORD}@127.0.0.1:{private_server.port}/0"
    lock, other = RedisLock(url), RedisLock(url)
    admin.script_flush()  # so the first script call also needs SCRIPT LOAD
    assert lock.try_acquire_fenced(NAME, 60) == 1
    assert lock.renew(NAME, 60)
    lock.release(NAME)
    assert other.try_acquire(NAME, 60)
    assert lock.try_acquire(NAME, 60) is False
    other.release(NAME)
    # A waiter subscribes to the name's channel; only the release's message wakes it.
    held = other.acquire(NAME, 60)
    assert held is not None
    lock.notified_recheck_seconds = 3600.0
    waiting = threading.Thread(target=lambda: won.append(lock.acquire(NAME, 60, wait=30)))
    won: list[Holding | None] = []
    waiting.start()
    _until(lambda: admin.pubsub_numsub(release_channel(NAME, cluster=False))[0][1] == 1)
    other.release_holding(held)
    waiting.join(40)
    assert won, "the waiter never returned"
    assert won[0] is not None, "the release's message did not wake the waiter"
    lock.release_holding(won[0])


def test_a_user_without_publish_still_releases(
    private_server: LocalServer, admin: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The release script's publish is protected: an ACL that forbids it (a user set up
    before waiters were notified) only leaves the waiters to poll."""
    admin.acl_setuser(
        "locks",
        enabled=True,
        passwords=[f"+{PASSWORD}"],
        keys=["firefly:scheduling:*"],
        commands=["+get", "+set", "+del", "+pexpire", "+incr", "+evalsha", "+script|load"],
    )
    url = f"redis://locks:{PASSWORD}@127.0.0.1:{private_server.port}/0"
    lock, other = RedisLock(url), RedisLock(url)
    assert lock.try_acquire(NAME, 60)
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling"):
        lock.release(NAME)
    assert not caplog.records, "the release failed on the forbidden publish"
    assert other.try_acquire(NAME, 60), "the release did not free the name"
    other.release(NAME)


def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)
