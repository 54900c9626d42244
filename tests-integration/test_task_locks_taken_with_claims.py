"""The task locks of the fires won, taken with their claims on a backend that batches them.

On Redis (one server) `FireRunner.claim_fires` takes the task locks of the fires it
won as one pipeline, so a won fire's worker sends only its release (issue 12: a
blocking round trip per fire from many threads cost more CPU in thread switches
than the request). The rules of a lock taken by the run itself must hold: the
holding is on the server before the body (read by a second client), a held lock
skips the fire, and a holding whose fire never runs is released, never leaked.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis

from firefly_scheduling.descriptor import ScheduledDescriptor
from firefly_scheduling.fires.execution import FireRunner
from firefly_scheduling.fires.outcome import Verdict
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_redis import RedisLock

GRACE = 5.0


class Clock:
    """A wall clock the test moves: the runner reads it for grace."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)

    def __call__(self) -> datetime:
        return self.now


def tasks(count: int) -> list[ScheduledDescriptor]:
    prefix = f"tests.ahead_{uuid.uuid4().hex}"
    return [
        ScheduledDescriptor(target=f"{prefix}:job{i}", lock_name=f"{prefix}:job{i}", fixed_rate=1.0)
        for i in range(count)
    ]


@pytest.fixture
def server(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def lock(redis_url: str) -> Iterator[RedisLock]:
    built = RedisLock(redis_url)
    yield built
    built.close()


def owner_on_server(server: redis.Redis, name: str) -> str | None:
    value = server.get(RedisLock.key(name))
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def test_won_fires_hold_their_task_locks_on_the_server_before_a_worker_runs_them(
    lock: RedisLock, server: redis.Redis
) -> None:
    assert lock.capabilities.batch_acquires
    clock = Clock()
    history = MemoryRunHistory()
    runner = FireRunner(lock, history=history, clock=clock, grace=GRACE)
    fires = tasks(3)
    outcomes = runner.claim_fires([(descriptor, clock.now) for descriptor in fires])
    holdings = [outcome.task_lock.answer if outcome.task_lock else None for outcome in outcomes]
    assert all(isinstance(holding, Holding) for holding in holdings), outcomes
    for descriptor, holding in zip(fires, holdings, strict=True):
        assert isinstance(holding, Holding)
        assert holding.fence is not None, "the task lock is fenced as the run's own would be"
        assert owner_on_server(server, descriptor.lock_name or "") == holding.owner
    seen_in_body: list[str | None] = []
    for descriptor, outcome in zip(fires, outcomes, strict=True):
        name = descriptor.lock_name or ""

        def body(name: str = name) -> None:
            seen_in_body.append(owner_on_server(server, name))

        result = runner.run(descriptor, clock.now, body, claim=outcome)
        assert result.verdict is Verdict.SUCCEEDED, result
        assert result.token == outcome.task_lock.answer.fence  # type: ignore[union-attr]
        assert owner_on_server(server, name) is None, "the task lock outlived its run"
    assert seen_in_body == [holding.owner for holding in holdings if isinstance(holding, Holding)]
    for descriptor in fires:
        assert [record.state for record in history.runs(descriptor.target)] == [RunState.SUCCEEDED]


def test_a_task_lock_held_elsewhere_skips_the_fire_it_was_taken_for(
    lock: RedisLock, server: redis.Redis, redis_url: str
) -> None:
    clock = Clock()
    history = MemoryRunHistory()
    runner = FireRunner(lock, history=history, clock=clock, grace=GRACE)
    [descriptor] = tasks(1)
    name = descriptor.lock_name or ""
    other = RedisLock(redis_url)
    try:
        assert other.try_acquire(name, 30)  # the previous fire still runs, on another node
        [outcome] = runner.claim_fires([(descriptor, clock.now)])
        assert outcome.verdict is Verdict.SUCCEEDED
        assert outcome.task_lock is not None
        assert outcome.task_lock.answer is None
        ran: list[int] = []
        result = runner.run(descriptor, clock.now, lambda: ran.append(1), claim=outcome)
        assert result.verdict is Verdict.OVERLAPPING
        assert ran == []
        assert owner_on_server(server, name) == other.holding(name).owner  # type: ignore[union-attr]
        assert [record.state for record in history.runs(descriptor.target)] == [RunState.SKIPPED]
    finally:
        other.close()


def test_a_fire_too_late_for_its_worker_releases_the_task_lock_taken_with_its_claim(
    lock: RedisLock, server: redis.Redis
) -> None:
    """A fire that waited past grace for a worker is skipped; its lock must not stay held
    (on the server until its TTL, and in this node's ledger, which would refuse the
    task's next fires)."""
    clock = Clock()
    runner = FireRunner(lock, history=MemoryRunHistory(), clock=clock, grace=GRACE)
    [descriptor] = tasks(1)
    name = descriptor.lock_name or ""
    instant = clock.now
    [outcome] = runner.claim_fires([(descriptor, instant)])
    assert outcome.task_lock is not None
    assert isinstance(outcome.task_lock.answer, Holding)
    clock.now = instant + timedelta(seconds=GRACE + 1)
    result = runner.run(descriptor, instant, lambda: None, claim=outcome)
    assert result.verdict is Verdict.TOO_LATE
    assert owner_on_server(server, name) is None, "the task lock of a skipped fire leaked"
    assert outcome.task_lock.answer.released
    assert lock.try_acquire(name, 30), "this node's ledger still held the task lock"
    lock.release(name)


def test_a_cluster_lock_takes_no_task_lock_ahead(redis_cluster_url: str) -> None:
    """redis-py refuses `EVALSHA` in a cluster pipeline: each worker acquires its own."""
    cluster_lock = RedisLock(redis_cluster_url)
    try:
        assert not cluster_lock.capabilities.batch_acquires
        clock = Clock()
        runner = FireRunner(cluster_lock, history=MemoryRunHistory(), clock=clock, grace=GRACE)
        [descriptor] = tasks(1)
        [outcome] = runner.claim_fires([(descriptor, clock.now)])
        assert outcome.verdict is Verdict.SUCCEEDED
        assert outcome.task_lock is None
        ran: list[int] = []
        result = runner.run(descriptor, clock.now, lambda: ran.append(1), claim=outcome)
        assert result.verdict is Verdict.SUCCEEDED
        assert ran == [1]
    finally:
        cluster_lock.close()
