"""`timeout=` on real servers: a timed-out body keeps its task lock, the history says so.

Redis holds the task lock, PostgreSQL the run history. A plain body that runs past
its timeout goes on, and keeps its lock for as long as it runs, well past the lock's
TTL: the keep-alive renews it meanwhile, so a second client (another node) never
takes the lock before the body returns. An `async def` body is cancelled at its
timeout. Either way the history records `timed_out`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.history import RunState
from firefly_scheduling.hosts.runtime.task_calls import acall_task
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_redis import AsyncRedisLock, RedisLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from unique_tasks import unique_task

T0 = datetime(2030, 1, 1, tzinfo=UTC)
LOCK_TTL = 1.0
TIMEOUT = 0.3
#: How long a timed-out body goes on: past two TTLs, so only renewals keep the lock.
OVERRUN = 2.5 * LOCK_TTL
#: How long a body waits for its timeout before the test gives up (a loaded machine).
PATIENCE = 30.0


def _task() -> ScheduledDescriptor:
    return unique_task("timeout", lock_ttl=LOCK_TTL, fixed_rate=60.0, timeout=TIMEOUT)


class OtherNode:
    """A second client of the Redis server, trying the task lock while the body runs."""

    def __init__(self, redis_url: str, name: str) -> None:
        self.lock = RedisLock(redis_url)
        self.name = name
        self.took: list[bool] = []

    def keep_trying(self, seconds: float) -> None:
        """Try the lock every 50 ms for `seconds`, recording each answer."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.took.append(self.lock.try_acquire(self.name, 30))
            time.sleep(0.05)

    def close(self) -> None:
        self.lock.close()


def overrunning_body(other: OtherNode) -> None:
    """Wait for the timeout, then go on past two TTLs while another node tries the lock."""
    context = current_fire()
    assert context is not None
    give_up = time.monotonic() + PATIENCE
    while not context.timed_out:
        assert time.monotonic() < give_up, "the body never saw its timeout"
        time.sleep(0.01)
    other.keep_trying(OVERRUN)


def assert_kept_then_recorded(
    result: FireResult, other: OtherNode, history: SqlRunHistory, target: str
) -> None:
    assert result.verdict is Verdict.TIMED_OUT, result.error
    assert not result.lost  # renewed all along
    assert len(other.took) > 10
    assert not any(other.took), "another node took the lock while the body still ran"
    assert other.lock.try_acquire(other.name, 30)  # free once the body returned
    other.lock.release(other.name)
    [record] = history.runs(target)
    assert (record.state, record.error) == (RunState.TIMED_OUT, "timed out after 300ms")


def run_threaded(
    redis_url: str, history: SqlRunHistory, fire: Fire, body: Callable[[], object]
) -> FireResult:
    """`fire` run once by a threaded runner on Redis, recorded in `history`."""
    node = FireRunner(
        RedisLock(redis_url), history=history, clock=lambda: T0, keepalive_interval=0.2
    )
    try:
        return node.run(fire, body)
    finally:
        node.close()


def run_on_asyncio(
    redis_url: str,
    history: SqlRunHistory,
    fire: Fire,
    body: Callable[[], Awaitable[object]],
    *,
    keepalive_interval: float | None = None,
) -> FireResult:
    """`fire` run once by an asyncio runner on Redis, recorded in `history`."""

    async def scenario() -> FireResult:
        node = AsyncFireRunner(
            AsyncRedisLock(redis_url),
            history=history,
            clock=lambda: T0,
            keepalive_interval=keepalive_interval,
        )
        try:
            return await node.run(fire, body)
        finally:
            await node.aclose()

    return asyncio.run(scenario())


@pytest.mark.parametrize("host", ["threaded", "asyncio"])
def test_a_timed_out_plain_body_keeps_its_lock_until_it_returns(
    redis_url: str, history: SqlRunHistory, host: str
) -> None:
    """On the asyncio host a plain body runs in a thread: the bound's cancellation waits
    for it there too."""
    descriptor = _task()
    assert descriptor.lock_name is not None
    other = OtherNode(redis_url, descriptor.lock_name)
    fire = Fire.at(descriptor, T0)
    try:
        if host == "threaded":
            result = run_threaded(redis_url, history, fire, lambda: overrunning_body(other))
        else:
            result = run_on_asyncio(
                redis_url,
                history,
                fire,
                lambda: acall_task(lambda: overrunning_body(other)),
                keepalive_interval=0.2,
            )
        assert_kept_then_recorded(result, other, history, descriptor.target)
    finally:
        other.close()


def test_a_timed_out_coroutine_body_is_cancelled_and_its_lock_released(
    redis_url: str, history: SqlRunHistory
) -> None:
    descriptor = _task()
    assert descriptor.lock_name is not None
    reached: list[str] = []

    async def body() -> None:
        reached.append("started")
        await asyncio.sleep(PATIENCE)
        reached.append("slept")  # never: cancelled at the timeout

    result = run_on_asyncio(redis_url, history, Fire.at(descriptor, T0), body)
    assert result.verdict is Verdict.TIMED_OUT
    assert reached == ["started"]
    other = RedisLock(redis_url)
    try:
        assert other.try_acquire(descriptor.lock_name, 30)  # released at the cancellation
        other.release(descriptor.lock_name)
    finally:
        other.close()
    [record] = history.runs(descriptor.target)
    assert (record.state, record.error) == (RunState.TIMED_OUT, "timed out after 300ms")
