"""A body is told its lock is lost once the lease lapsed, before another node can take it.

The keep-alive marks a holding lost when a renewal comes back refused or failed
after the lease lapsed. A renewal that does not come back at all (the backend's
traffic stalled, a blackholed connection) used to leave `current_fire().lost`
False until the driver's own timeout, seconds after the lease had lapsed on the
server and another node had taken the lock: the body went on, believing it still
held the task, alongside the new holder, and a node killed meanwhile never said it
had lost the lock. Found by the fault checker (database backend on MariaDB: a body
overlapped by the fire's adopter, then its node killed, never having seen `lost`).

Real sockets: the runner's Redis lock goes through the fault checker's proxy, whose
traffic is stalled while the body runs; a second Redis client, straight to the
server, takes the lock once the lease lapses there. The moment it has the lock, the
body must already be told it lost it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime

import pytest

from chaos_harness.proxy import FaultyProxy
from firefly_scheduling import current_fire
from firefly_scheduling.fires.context import FireContext
from firefly_scheduling.fires.outcome import Fire, FireResult
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_redis import AsyncRedisLock, RedisLock

T0 = datetime(2030, 1, 1, tzinfo=UTC)
LOCK_TTL = 1.0
#: Longer than the TTL and than the Redis client's 3 s socket timeout: the renewal in
#: flight when the stall begins cannot come back before the lease lapses.
STALL_SECONDS = 6.0
#: How long the second client keeps trying before the test gives up (a loaded machine).
PATIENCE = 30.0


def _task() -> ScheduledDescriptor:
    name = f"tests.lapse_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=name, lock_name=name, lock_ttl=LOCK_TTL, fixed_rate=60.0)


class OtherNode:
    """A second client of the Redis server, straight to it, taking the task lock."""

    def __init__(self, redis_url: str, name: str) -> None:
        self.lock = RedisLock(redis_url)
        self.name = name

    def take(self, context: FireContext) -> bool:
        """Try every 20 ms until the lock is taken; what the body was told at that moment."""
        give_up = time.monotonic() + PATIENCE
        while not self.lock.try_acquire(self.name, 30):
            assert time.monotonic() < give_up, "the lease never lapsed on the server"
            time.sleep(0.02)
        told_lost = context.lost
        self.lock.release(self.name)
        return told_lost


def _stall_then_take(proxy: FaultyProxy, other: OtherNode) -> bool:
    context = current_fire()
    assert context is not None
    assert not context.lost  # held, renewed
    proxy.stall(STALL_SECONDS)
    return other.take(context)


def run_threaded(url: str, fire: Fire, proxy: FaultyProxy, other: OtherNode) -> list[bool]:
    told: list[bool] = []
    node = FireRunner(RedisLock(url), clock=lambda: T0, keepalive_interval=0.2)
    try:
        node.run(fire, lambda: told.append(_stall_then_take(proxy, other)))
    finally:
        node.close()
    return told


def run_on_asyncio(url: str, fire: Fire, proxy: FaultyProxy, other: OtherNode) -> list[bool]:
    told: list[bool] = []

    async def body() -> None:  # a coroutine body: the asyncio keep-alive renews it
        context = current_fire()
        assert context is not None
        assert not context.lost
        proxy.stall(STALL_SECONDS)
        told.append(await asyncio.to_thread(other.take, context))

    async def scenario() -> FireResult:
        node = AsyncFireRunner(AsyncRedisLock(url), clock=lambda: T0, keepalive_interval=0.2)
        try:
            return await node.run(fire, body)
        finally:
            await node.aclose()

    asyncio.run(scenario())
    return told


@pytest.mark.parametrize("host", ["threaded", "asyncio"])
def test_a_body_is_told_lost_before_another_node_can_take_its_lapsed_lock(
    redis_url: str, proxied_redis_url: tuple[str, FaultyProxy], host: str
) -> None:
    url, proxy = proxied_redis_url
    descriptor = _task()
    assert descriptor.lock_name is not None
    other = OtherNode(redis_url, descriptor.lock_name)
    try:
        run = run_threaded if host == "threaded" else run_on_asyncio
        told = run(url, Fire.at(descriptor, T0), proxy, other)
    finally:
        other.lock.close()
    assert told == [True], "another node took the lock while the body was told it held it"
