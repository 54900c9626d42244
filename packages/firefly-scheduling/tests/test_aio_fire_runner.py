"""AsyncFireRunner and AsyncHost: the fire runner's rules, awaited on one event loop.

The asyncio runner is the source of the sync one (generated), so the sync runner's
suite already covers their shared text; these tests cover what only the asyncio
flavour does: awaiting the lock and the body, the keep-alive task, the history in a
worker thread, and the host's cancellation at the end of the grace period.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import UTC, datetime

from firefly_scheduling import current_fire
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.fires.context import FireContext
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.hosts.asyncio_host import AsyncHost
from firefly_scheduling.hosts.runtime.asyncio_runtime import AsyncTaskRuntime
from firefly_scheduling.hosts.runtime.coroutine_loop import CoroutineLoop
from firefly_scheduling.hosts.runtime.task_calls import call_task
from firefly_scheduling.hosts.runtime.task_runtime import Lazy
from firefly_scheduling.initial_delay import InitialDelayGate, MemoryAnchorStore
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor


def descriptor(**options: object) -> ScheduledDescriptor:
    name = f"aio-{uuid.uuid4().hex[:8]}"
    return ScheduledDescriptor(  # type: ignore[arg-type]
        target=f"tests.aio:{name}", lock_name=name, **{"fixed_rate": 60.0, **options}
    )


def now() -> datetime:
    return datetime.now(UTC)


def test_two_nodes_on_one_fire_run_it_once_and_the_body_sees_its_fire() -> None:
    task = descriptor(lock_ttl=5.0)
    history = MemoryRunHistory()
    seen: list[FireContext | None] = []

    async def body() -> None:
        await asyncio.sleep(0.05)
        seen.append(current_fire())

    async def scenario() -> list[Verdict]:
        nodes = [
            AsyncFireRunner(AsyncInMemoryLock(), history=history, node=f"n{i}") for i in range(5)
        ]
        instant = now()
        outcomes = await asyncio.gather(*(node.run(Fire.at(task, instant), body) for node in nodes))
        return [outcome.verdict for outcome in outcomes]

    statuses = asyncio.run(scenario())
    assert statuses.count(Verdict.SUCCEEDED) == 1
    assert statuses.count(Verdict.CLAIMED_ELSEWHERE) == 4
    assert len(seen) == 1
    context = seen[0]
    assert context is not None
    assert context.target == task.target
    assert context.token is not None  # the memory lock fences
    [record] = history.runs(task.target)
    assert record.state is RunState.SUCCEEDED
    assert record.token == context.token


def test_the_keepalive_task_holds_the_lock_past_its_ttl_while_the_body_awaits() -> None:
    task = descriptor(lock_ttl=0.3)

    async def scenario() -> tuple[Verdict, Verdict, bool]:
        runner = AsyncFireRunner(AsyncInMemoryLock(), node="a")
        other = AsyncFireRunner(AsyncInMemoryLock(), node="b")
        lost: list[bool] = []

        async def long_body() -> None:
            await asyncio.sleep(1.0)  # three TTLs
            fire = current_fire()
            lost.append(fire is not None and fire.lost)

        async def quick_body() -> None:
            return None

        first = asyncio.ensure_future(runner.run(Fire.at(task, now()), long_body))
        await asyncio.sleep(0.7)  # past two TTLs: only renewals keep the task lock
        # a later fire of the same task, by another node: the task lock is still held
        second = await other.run(Fire.at(task, now()), quick_body)
        return (await first).verdict, second.verdict, lost[0]

    first, second, lost = asyncio.run(scenario())
    assert first is Verdict.SUCCEEDED
    assert second is Verdict.OVERLAPPING
    assert lost is False


def test_a_failing_coroutine_is_recorded_failed_with_its_error() -> None:
    task = descriptor(lock_ttl=5.0)
    history = MemoryRunHistory()

    async def body() -> None:
        await asyncio.sleep(0)
        raise ValueError("no")

    outcome = asyncio.run(
        AsyncFireRunner(AsyncInMemoryLock(), history=history).run(Fire.at(task, now()), body)
    )
    assert outcome.verdict is Verdict.FAILED
    assert outcome.error == "ValueError: no"
    [record] = history.runs(task.target)
    assert record.state is RunState.FAILED


def runtime_for(lock: AsyncInMemoryLock, history: MemoryRunHistory) -> AsyncTaskRuntime:
    return AsyncTaskRuntime(
        lock=Lazy.of(lock),
        gate=Lazy(lambda: InitialDelayGate(MemoryAnchorStore())),
        node="host",
        fire_runner=lambda built: AsyncFireRunner(built.lock.get(), history=history, node="host"),
    )


def test_the_async_host_cancels_a_coroutine_past_the_grace_period_and_frees_its_lock() -> None:
    import sys  # noqa: PLC0415 - the task module is created for this test only
    import types  # noqa: PLC0415

    module = types.ModuleType("firefly_aio_host_stuck")
    started = asyncio.Event()

    async def stuck() -> None:
        started.set()
        await asyncio.sleep(3600)

    module.stuck = stuck  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    task = ScheduledDescriptor(
        target="firefly_aio_host_stuck:stuck",
        fixed_delay=3600.0,  # the first run starts with the host
        lock_name=f"stuck-{uuid.uuid4().hex[:8]}",
        lock_ttl=5.0,
    )
    history = MemoryRunHistory()

    async def scenario() -> tuple[list[object], bool, float]:
        lock = AsyncInMemoryLock()
        host = AsyncHost([task], runtime_for(lock, history), grace_period=0.3)
        host.start()
        await asyncio.wait_for(started.wait(), 5.0)
        loop = asyncio.get_running_loop()
        begun = loop.time()
        cancelled = await host.stop()
        took = loop.time() - begun
        assert task.lock_name is not None
        # a second client: the task lock is free once the host stopped
        free = await AsyncInMemoryLock().try_acquire(task.lock_name, 5.0)
        return cancelled, free, took

    try:
        cancelled, free, took = asyncio.run(scenario())
    finally:
        del sys.modules[module.__name__]
    assert len(cancelled) == 1
    assert free
    assert 0.3 <= took < 5.0
    [record] = history.runs(task.target)
    assert record.state is RunState.FAILED


def test_a_fixed_delay_task_on_the_async_host_runs_again_after_each_run() -> None:
    import sys  # noqa: PLC0415 - the task module is created for this test only
    import types  # noqa: PLC0415

    module = types.ModuleType("firefly_aio_host_again")
    runs: list[float] = []

    async def again() -> None:
        runs.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0.05)

    module.again = again  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    task = ScheduledDescriptor(
        target="firefly_aio_host_again:again",
        fixed_delay=0.2,
        lock_name=f"again-{uuid.uuid4().hex[:8]}",
        lock_ttl=5.0,
    )

    async def scenario() -> None:
        host = AsyncHost([task], runtime_for(AsyncInMemoryLock(), MemoryRunHistory()))
        host.start()
        await asyncio.sleep(1.2)
        assert await host.stop() == []

    try:
        asyncio.run(scenario())
    finally:
        del sys.modules[module.__name__]
    assert len(runs) >= 3
    # end to start: each start is at least the delay after the previous run's end
    assert all(later - earlier >= 0.25 - 0.02 for earlier, later in itertools.pairwise(runs))


def test_an_async_body_on_the_sync_runner_is_claimed_fenced_and_recorded() -> None:
    task = descriptor(lock_ttl=5.0)
    history = MemoryRunHistory()
    loop = CoroutineLoop()
    seen: list[FireContext | None] = []

    async def body() -> None:
        await asyncio.sleep(0.01)
        seen.append(current_fire())

    try:
        runner = FireRunner(InMemoryLock(), history=history, node="sync")
        outcome = runner.run(Fire.at(task, now()), lambda: call_task(body, loop))
    finally:
        loop.close()
    assert outcome.verdict is Verdict.SUCCEEDED
    [context] = seen
    assert context is not None
    assert context.token == outcome.token is not None
    [record] = history.runs(task.target)
    assert record.state is RunState.SUCCEEDED
    assert record.token == outcome.token
