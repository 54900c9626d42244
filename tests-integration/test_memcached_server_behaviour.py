"""MemcachedLock on the shared memcached: what it stores, expiry rules, CAS, fence seeding.

Each test uses names of its own and touches only the items of those names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pymemcache.client.base import Client

from firefly_scheduling import LockBackendError
from firefly_scheduling_memcached import AsyncMemcachedLock, MemcachedLock
from firefly_scheduling_memcached.url import memcached_server

sys.path.insert(0, str(Path(__file__).resolve().parent))
from threads_together import run_together

HEX_TOKEN_LENGTH = 32
DAY = 24 * 3600


@pytest.fixture
def server(memcached_url: str) -> Iterator[Client]:
    """A plain client for looking at the server, as an operator would."""
    client = Client(memcached_server(memcached_url), default_noreply=False, timeout=3)
    yield client
    client.close()


@pytest.fixture
def name(server: Client) -> Iterator[str]:
    """A lock name of the test's own; its lock and fence items are deleted afterwards."""
    fresh = f"memcached-behaviour:{uuid.uuid4().hex}"
    yield fresh
    server.delete_many([MemcachedLock.key(fresh), MemcachedLock.fence_key(fresh)])


@pytest.fixture
def nodes(memcached_url: str) -> Iterator[list[MemcachedLock]]:
    made = [MemcachedLock(memcached_url) for _ in range(2)]
    yield made
    for lock in made:
        lock.close()


#: Seconds an absolute expiry may read off on one host: memcached's clock ticks once a
#: second and lags further when the server is starved. A relative 45 days would read
#: as a 1970 date (expired at once), so any bound far below a day still tells them apart.
SERVER_CLOCK_SLACK = 10


def remaining_seconds(server: Client, key: str) -> int:
    """The item's remaining TTL as the server counts it (-1: no expiry), via `mg <key> t`."""
    reply = server.raw_command(f"mg {key} t".encode())
    assert reply.startswith(b"HD "), f"no item {key}: {reply!r}"
    flags = {flag[:1]: flag[1:] for flag in reply.split()[1:]}
    return int(flags[b"t"])


def test_a_held_lock_is_the_prefixed_item_holding_a_token(
    nodes: list[MemcachedLock], server: Client, name: str
) -> None:
    lock, _ = nodes
    assert lock.try_acquire(name, 10)
    value = server.get(f"firefly:scheduling:lock:{name}")
    assert isinstance(value, bytes)
    assert len(value) == HEX_TOKEN_LENGTH
    # ceil(10) + 1 tick of the server's once-a-second clock.
    assert remaining_seconds(server, MemcachedLock.key(name)) in (10, 11)
    lock.release(name)
    assert server.get(MemcachedLock.key(name)) is None


def test_names_memcached_cannot_take_are_stored_under_their_digest(
    nodes: list[MemcachedLock], server: Client
) -> None:
    lock, other = nodes
    name = f"two words, ümlauts, 日本語 {uuid.uuid4().hex}"
    assert lock.try_acquire(name, 30)
    assert MemcachedLock.key(name).startswith("firefly:scheduling:lock-sha256:")
    assert server.get(MemcachedLock.key(name)) is not None
    assert other.try_acquire(name, 30) is False
    lock.release(name)


@pytest.mark.slow
def test_a_one_second_lease_lasts_at_least_one_second_whatever_the_clock_phase(
    nodes: list[MemcachedLock], name: str
) -> None:
    holder, other = nodes
    # The server's clock ticks once a second; start at several points within a second.
    for phase in (0.0, 0.3, 0.6, 0.9):
        time.sleep((phase - time.time()) % 1)
        started = time.monotonic()
        assert holder.try_acquire(name, 1.0)
        time.sleep(max(0.0, started + 0.95 - time.monotonic()))
        assert other.try_acquire(name, 30) is False, f"freed before its TTL (phase {phase})"
        holder.release(name)


def test_a_ttl_over_30_days_is_sent_as_an_absolute_time(
    nodes: list[MemcachedLock], server: Client, name: str
) -> None:
    lock, other = nodes
    ttl = 45 * DAY
    assert lock.try_acquire(name, ttl)
    # Sent as a relative 45 days, memcached would read a 1970 date: expired at once.
    assert other.try_acquire(name, 30) is False
    # Same host, same clock: the server counts the full TTL down, within the rounding
    # and the lag of its once-a-second clock (3 s seen on a loaded CI machine).
    assert abs(remaining_seconds(server, MemcachedLock.key(name)) - ttl) <= SERVER_CLOCK_SLACK
    assert lock.renew(name, 60 * DAY)
    remaining = remaining_seconds(server, MemcachedLock.key(name))
    assert abs(remaining - 60 * DAY) <= SERVER_CLOCK_SLACK
    lock.release(name)


def test_release_leaves_an_item_holding_another_token(
    nodes: list[MemcachedLock], server: Client, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    lock, _ = nodes
    assert lock.try_acquire(name, 30)
    # As if the lease had expired and another node had taken the name.
    server.set(MemcachedLock.key(name), b"another-node-token", expire=30)
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling.locks"):
        lock.release(name)
    assert server.get(MemcachedLock.key(name)) == b"another-node-token"
    assert "lost before release" in caplog.text


def test_renew_extends_the_item_and_fails_once_another_token_holds_it(
    nodes: list[MemcachedLock], server: Client, name: str
) -> None:
    lock, _ = nodes
    assert lock.try_acquire(name, 1)
    assert lock.renew(name, 60)
    assert remaining_seconds(server, MemcachedLock.key(name)) >= 60
    server.set(MemcachedLock.key(name), b"another-node-token", expire=30)
    assert lock.renew(name, 60) is False
    assert lock.is_lost(name)
    assert server.get(MemcachedLock.key(name)) == b"another-node-token"


def test_the_fence_counter_never_expires_and_starts_from_the_clock(
    nodes: list[MemcachedLock], server: Client, name: str
) -> None:
    lock, _ = nodes
    before = time.time_ns() // 1000
    token = lock.try_acquire_fenced(name, 30)
    assert token is not None
    assert before <= token <= time.time_ns() // 1000
    assert remaining_seconds(server, MemcachedLock.fence_key(name)) == -1
    lock.release(name)


def test_fence_tokens_keep_increasing_when_the_counter_is_lost(
    nodes: list[MemcachedLock], server: Client, name: str
) -> None:
    lock, other = nodes
    tokens = []
    for holder in (lock, other, lock):
        token = holder.try_acquire_fenced(name, 30)
        assert token is not None
        tokens.append(token)
        holder.release(name)
        # As an eviction or a restart would: the counter item disappears.
        assert server.delete(MemcachedLock.fence_key(name))
    assert tokens == sorted(set(tokens)), tokens


def test_nodes_racing_to_seed_a_missing_counter_get_distinct_tokens(
    memcached_url: str, name: str
) -> None:
    racers = [MemcachedLock(memcached_url) for _ in range(8)]
    tokens: list[int] = []

    def race(lock: MemcachedLock) -> None:
        # The fence hook on its own: acquisitions would serialise the racers.
        tokens.append(lock._fence(name))

    assert run_together(race, racers, timeout=30) == []
    assert len(set(tokens)) == len(racers), tokens
    assert max(tokens) - min(tokens) == len(racers) - 1, "one seed, then increments"
    for lock in racers:
        lock.close()


def test_a_refused_fenced_attempt_leaves_the_holder_untouched(
    nodes: list[MemcachedLock], server: Client, name: str
) -> None:
    """The add and the increment are pipelined: a refused add only leaves a gap in tokens."""
    holder, contender = nodes
    first = holder.try_acquire_fenced(name, 30)
    assert first is not None
    held = server.gets(MemcachedLock.key(name))
    assert contender.try_acquire_fenced(name, 30) is None
    assert server.gets(MemcachedLock.key(name)) == held
    holder.release(name)
    later = contender.try_acquire_fenced(name, 30)
    assert later is not None
    assert later > first
    contender.release(name)


def test_a_counter_that_cannot_count_frees_the_new_holding(
    nodes: list[MemcachedLock], server: Client, name: str
) -> None:
    lock, other = nodes
    server.set(MemcachedLock.fence_key(name), b"not a number")
    with pytest.raises(LockBackendError, match="meta increment"):
        lock.try_acquire_fenced(name, 30)
    assert lock.is_held(name) is False
    assert server.get(MemcachedLock.key(name)) is None
    assert other.try_acquire(name, 30)
    other.release(name)


def test_cancelled_async_operations_never_leave_a_connection_out_of_step(
    memcached_url: str, name: str
) -> None:
    """A coroutine cancelled mid-exchange leaves half a reply: that connection must go."""

    async def main() -> None:
        lock = AsyncMemcachedLock(memcached_url, pool_size=2)
        try:
            for round_ in range(100):
                task = asyncio.ensure_future(lock.try_acquire(f"{name}:{round_}", 30))
                for _ in range(round_ % 4):  # cancel at varying points of the exchange
                    await asyncio.sleep(0)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                # Every reply the instance reads now must be the answer to its own command.
                probe = f"{name}:probe:{round_}"
                assert await lock.try_acquire(probe, 30)
                assert await lock.renew(probe, 30)
                await lock.release(probe)
                assert lock.is_held(probe) is False
        finally:
            await lock.aclose()

    asyncio.run(main())
