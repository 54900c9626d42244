"""`timeout=`: a body bounded by its task's timeout, and the run recorded `timed_out`.

On InMemoryLock and the memory history. A plain body is never stopped: it sees
`current_fire().timed_out` become True and runs to its end, its task lock held; an
`async def` body is cancelled at the timeout, on the asyncio runner and, through
`call_task`, on the threaded one. Another cancellation (the host's) is no timeout.
Bodies wait for the flag with a generous bound rather than sleeping a guessed time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime

import pytest

from firefly_scheduling import current_fire
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.fires.context import FireContext, entered
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.policy import RUN, BeforeBody, DefaultPolicy, RunWithin
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.hosts.runtime.coroutine_loop import CoroutineLoop
from firefly_scheduling.hosts.runtime.task_calls import call_task
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, tzinfo=UTC)
TIMEOUT = 0.2
#: How long a body waits for its timeout before the test gives up (a loaded machine).
PATIENCE = 30.0


def task(timeout: float | None = TIMEOUT) -> ScheduledDescriptor:
    """A locked task with a unique name (the memory lock's table is process-wide)."""
    target = f"tests.timeout_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(
        target=target, lock_name=target, lock_ttl=30.0, fixed_rate=60.0, timeout=timeout
    )


def runner(history: MemoryRunHistory) -> FireRunner:
    return FireRunner(InMemoryLock(), history=history, clock=lambda: T0, node="n1")


def until_timed_out() -> FireContext:
    """Wait in the body until its fire has timed out; the fire's context."""
    context = current_fire()
    assert context is not None
    give_up = time.monotonic() + PATIENCE
    while not context.timed_out:
        assert time.monotonic() < give_up, "the body never saw its timeout"
        time.sleep(0.01)
    return context


class TestAPlainBody:
    def test_runs_to_its_end_past_its_timeout_and_is_recorded_timed_out(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        seen: list[bool] = []

        def body() -> None:
            context = current_fire()
            assert context is not None
            seen.append(context.timed_out)  # not yet, at the start
            until_timed_out()
            seen.append(context.timed_out)  # still running: nothing stopped the thread

        result = runner(history).run(Fire.at(descriptor, T0), body)
        assert seen == [False, True]
        assert result.verdict is Verdict.TIMED_OUT
        assert result.ran
        assert result.error == "timed out after 200ms"
        [record] = history.runs(descriptor.target)
        assert (record.state, record.error) == (RunState.TIMED_OUT, "timed out after 200ms")

    def test_keeps_its_task_lock_until_it_returns(self) -> None:
        descriptor = task()
        name = descriptor.lock_name
        assert name is not None
        other_node = InMemoryLock()
        tried: list[bool] = []

        def body() -> None:
            until_timed_out()
            tried.append(other_node.try_acquire(name, 30))

        result = runner(MemoryRunHistory()).run(Fire.at(descriptor, T0), body)
        assert result.verdict is Verdict.TIMED_OUT
        assert tried == [False]  # held while the timed-out body still ran
        assert other_node.try_acquire(name, 30)  # released once it returned
        other_node.release(name)

    def test_that_raises_after_its_timeout_is_timed_out_with_the_error(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()

        def body() -> None:
            until_timed_out()
            raise ValueError("late and broken")

        result = runner(history).run(Fire.at(descriptor, T0), body)
        assert result.verdict is Verdict.TIMED_OUT
        assert result.error == "timed out after 200ms; then: ValueError: late and broken"
        [record] = history.runs(descriptor.target)
        assert record.state is RunState.TIMED_OUT

    def test_within_its_timeout_succeeds_and_never_sees_the_flag(self) -> None:
        history = MemoryRunHistory()
        descriptor = task(timeout=PATIENCE)
        seen: list[bool] = []

        def body() -> None:
            context = current_fire()
            assert context is not None
            seen.append(context.timed_out)

        result = runner(history).run(Fire.at(descriptor, T0), body)
        assert (result.verdict, seen) == (Verdict.SUCCEEDED, [False])
        [record] = history.runs(descriptor.target)
        assert record.state is RunState.SUCCEEDED

    def test_raising_within_its_timeout_fails(self) -> None:
        def body() -> None:
            raise TimeoutError("the body's own")

        result = runner(MemoryRunHistory()).run(Fire.at(task(timeout=PATIENCE), T0), body)
        assert result.verdict is Verdict.FAILED
        assert result.error == "TimeoutError: the body's own"

    def test_of_a_task_without_timeout_never_times_out(self) -> None:
        seen: list[FireContext] = []

        def body() -> None:
            context = current_fire()
            assert context is not None
            seen.append(context)

        result = runner(MemoryRunHistory()).run(Fire.at(task(timeout=None), T0), body)
        assert result.verdict is Verdict.SUCCEEDED
        [context] = seen
        assert (context.deadline, context.timed_out, context.seconds_left()) == (None, False, None)


class TestACoroutineBody:
    def test_is_cancelled_at_its_timeout_on_the_asyncio_runner(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        reached: list[str] = []

        async def body() -> None:
            reached.append("started")
            await asyncio.sleep(PATIENCE)
            reached.append("slept")  # never: cancelled at the timeout

        async def scenario() -> Verdict:
            node = AsyncFireRunner(AsyncInMemoryLock(), history=history, clock=lambda: T0)
            return (await node.run(Fire.at(descriptor, T0), body)).verdict

        began = time.monotonic()
        assert asyncio.run(scenario()) is Verdict.TIMED_OUT
        assert time.monotonic() - began < PATIENCE  # it did not sleep its whole sleep
        assert reached == ["started"]
        [record] = history.runs(descriptor.target)
        assert (record.state, record.error) == (RunState.TIMED_OUT, "timed out after 200ms")

    def test_cancelled_by_its_host_is_no_timeout(self) -> None:
        history = MemoryRunHistory()
        descriptor = task(timeout=PATIENCE)
        started = asyncio.Event()

        async def body() -> None:
            started.set()
            await asyncio.sleep(PATIENCE)

        async def scenario() -> None:
            node = AsyncFireRunner(AsyncInMemoryLock(), history=history, clock=lambda: T0)
            running = asyncio.ensure_future(node.run(Fire.at(descriptor, T0), body))
            await started.wait()
            running.cancel()  # the host shutting down
            with pytest.raises(asyncio.CancelledError):
                await running

        asyncio.run(scenario())
        [record] = history.runs(descriptor.target)
        assert record.state is RunState.FAILED
        assert record.error == "interrupted: the body did not return"

    def test_is_cancelled_at_its_timeout_through_call_task(self) -> None:
        """The threaded hosts run an `async def` body on their own loop: bounded too."""
        reached: list[str] = []

        async def body() -> None:
            reached.append("started")
            await asyncio.sleep(PATIENCE)
            reached.append("slept")

        context = FireContext(
            "tests.timeout:job", T0, 1, None, "n1", None, deadline=time.monotonic() + TIMEOUT
        )
        loop = CoroutineLoop()
        try:
            with entered(context), pytest.raises(TimeoutError):
                call_task(body, loop)
        finally:
            loop.close()
        assert reached == ["started"]
        assert context.timed_out


class TestThePolicy:
    def test_the_default_policy_bounds_the_body_only_for_a_task_with_a_timeout(self) -> None:
        facts = BeforeBody(attempt=1, token=None)
        policy = DefaultPolicy()
        assert policy.before_body(Fire.at(task(timeout=None), T0), facts) is RUN
        assert policy.before_body(Fire.at(task(timeout=90.0), T0), facts) == RunWithin(90.0)
