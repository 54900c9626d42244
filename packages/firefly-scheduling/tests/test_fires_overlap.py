"""`overlap=` in the fire path, on the memory lock and history (two runners = two nodes).

The memory lock's table is process-wide, so two runners on two `InMemoryLock`s
exclude each other as two nodes would. The history is read as an operator reads it
(`runs`), the `runs` command and the Django admin show a buffered record, and
telemetry counts buffered fires. Bodies wait on events with a generous bound.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from firefly_scheduling import current_fire
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.cli import main
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.fires.overlap_wait import WAITS_FOR
from firefly_scheduling.fires.policy import (
    ANOTHER_FIRE_REPLACES,
    QUEUE_FULL,
    RunAlongside,
    Skip,
    WaitTurn,
)
from firefly_scheduling.fires.policy import overlap_answer as answer_of
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.fires.running import CANCELLED_BY_A_NEWER_FIRE
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.hosts.runtime.coroutine_loop import CoroutineLoop
from firefly_scheduling.hosts.runtime.task_calls import call_task
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.overlap import BUFFER_ALL_MAX_WAITING

T0 = datetime(2030, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
PATIENCE = 30.0


def task(overlap: str | None) -> ScheduledDescriptor:
    target = f"tests.overlap_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(
        target=target, lock_name=target, lock_ttl=30.0, fixed_rate=60.0, overlap=overlap
    )


def node(name: str, history: MemoryRunHistory) -> FireRunner:
    return FireRunner(InMemoryLock(), history=history, clock=lambda: T0, node=name)


def until(check: Callable[[], bool], what: str) -> None:
    give_up = time.monotonic() + PATIENCE
    while not check():
        assert time.monotonic() < give_up, what
        time.sleep(0.01)


def state_of(history: MemoryRunHistory, target: str, instant: datetime) -> RunState | None:
    found = [r.state for r in history.runs(target, limit=100) if r.instant == instant]
    return found[0] if found else None


@pytest.mark.parametrize(
    ("overlap", "expected"),
    [
        (None, Skip),
        ("allow_all", RunAlongside),
        ("buffer_one", WaitTurn),
    ],
)
def test_when_held_answers_as_the_task_s_overlap_says(overlap: str | None, expected: type) -> None:
    fire = Fire.at(task(overlap), T0)
    answer = answer_of(fire, "held")
    assert isinstance(answer, expected)
    if isinstance(answer, WaitTurn):
        assert answer.slots == (f"firefly:overlap-waiting:0:{fire.target}",)


def test_a_buffered_fire_is_recorded_buffered_while_it_waits_then_runs_as_attempt_1() -> None:
    history = MemoryRunHistory()
    described = task("buffer_one")
    a, b = node("a", history), node("b", history)
    release = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(a.run, Fire.at(described, T0), lambda: release.wait(PATIENCE))
        until(lambda: state_of(history, described.target, T0) is RunState.RUNNING, "no run")
        waiting = pool.submit(b.run, Fire.at(described, T0 + MINUTE), lambda: None)
        until(
            lambda: state_of(history, described.target, T0 + MINUTE) is RunState.BUFFERED,
            "the waiting fire was never recorded buffered",
        )
        [record] = [r for r in history.runs(described.target) if r.instant == T0 + MINUTE]
        assert (record.node, record.started_at) == ("b", None)
        assert record.error == f"{WAITS_FOR} {described.target!r}"
        assert not waiting.done()
        release.set()
        ran, waited = first.result(PATIENCE), waiting.result(PATIENCE)
    assert (ran.verdict, waited.verdict) == (Verdict.SUCCEEDED, Verdict.SUCCEEDED)
    assert waited.buffered_seconds is not None
    [record] = [r for r in history.runs(described.target) if r.instant == T0 + MINUTE]
    assert (record.state, record.attempt, record.error) == (RunState.SUCCEEDED, 1, None)


def test_allow_all_never_adopts_a_run_alongside_that_is_still_running() -> None:
    history = MemoryRunHistory()
    described = task("allow_all")
    a, b = node("a", history), node("b", history)
    first_may_end, second_may_end = threading.Event(), threading.Event()
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(a.run, Fire.at(described, T0), lambda: first_may_end.wait(PATIENCE))
        until(lambda: state_of(history, described.target, T0) is RunState.RUNNING, "no run")
        second = pool.submit(
            b.run, Fire.at(described, T0 + MINUTE), lambda: second_may_end.wait(PATIENCE)
        )
        until(
            lambda: state_of(history, described.target, T0 + MINUTE) is RunState.RUNNING,
            "the fire never ran alongside",
        )
        first_may_end.set()
        assert first.result(PATIENCE).verdict is Verdict.SUCCEEDED
        third = a.run(Fire.at(described, T0 + 2 * MINUTE), lambda: None)  # takes the lock
        assert third.verdict is Verdict.SUCCEEDED
        assert third.adopted == ()  # the run alongside is alive: not adopted, not expired
        assert state_of(history, described.target, T0 + MINUTE) is RunState.RUNNING
        second_may_end.set()
        alongside = second.result(PATIENCE)
    assert alongside.verdict is Verdict.SUCCEEDED
    assert alongside.token is None
    records = {r.instant: (r.state, r.attempt) for r in history.runs(described.target)}
    assert records == {
        T0: (RunState.SUCCEEDED, 1),
        T0 + MINUTE: (RunState.SUCCEEDED, 1),
        T0 + 2 * MINUTE: (RunState.SUCCEEDED, 1),
    }


def test_allow_all_expires_the_record_of_a_run_whose_holding_of_the_task_lock_ended() -> None:
    """A node took the task lock, wrote its run's start and died before the body (or
    its close was refused, then it was killed): the next fire that holds the lock,
    under a newer token, closes that record `expired`; a run alongside, which holds
    no token, is left alone."""
    history = MemoryRunHistory()
    described = task("allow_all")
    dead_lock = InMemoryLock()
    token = dead_lock.try_acquire_fenced(described.target, 0.05)
    assert token is not None
    history.start(described.target, T0, lock=described.target, node="dead", token=token, at=T0)
    alongside = T0 + MINUTE  # a run without the lock, on a node still running it
    history.start(
        described.target, alongside, lock=described.target, node="alive", token=None, at=T0
    )
    time.sleep(0.1)  # the dead node's lease lapses: nobody renews it

    later = node("b", history).run(Fire.at(described, T0 + 2 * MINUTE), lambda: None)

    assert later.verdict is Verdict.SUCCEEDED
    assert later.token is not None
    assert later.token > token
    assert [(r.fire.instant, r.verdict) for r in later.adopted] == [(T0, Verdict.EXPIRED)]
    [record] = [r for r in history.runs(described.target) if r.instant == T0]
    assert (record.state, record.attempt) == (RunState.EXPIRED, 1)
    assert record.error is not None
    assert "an allow_all task adopts nothing" in record.error
    assert state_of(history, described.target, alongside) is RunState.RUNNING


def test_the_asyncio_runner_buffers_one_fire_and_skips_the_next_with_why() -> None:
    history = MemoryRunHistory()
    described = task("buffer_one")

    async def scenario() -> tuple[FireResult, FireResult, FireResult]:
        a = AsyncFireRunner(AsyncInMemoryLock(), history=history, clock=lambda: T0, node="a")
        b = AsyncFireRunner(AsyncInMemoryLock(), history=history, clock=lambda: T0, node="b")
        release = asyncio.Event()

        async def long_body() -> None:
            await asyncio.wait_for(release.wait(), PATIENCE)

        async def short_body() -> None:
            return None

        first = asyncio.create_task(a.run(Fire.at(described, T0), long_body))
        while state_of(history, described.target, T0) is not RunState.RUNNING:
            await asyncio.sleep(0.01)
        second = asyncio.create_task(b.run(Fire.at(described, T0 + MINUTE), short_body))
        while state_of(history, described.target, T0 + MINUTE) is not RunState.BUFFERED:
            await asyncio.sleep(0.01)
        third = await a.run(Fire.at(described, T0 + 2 * MINUTE), short_body)
        release.set()
        results = (await first, await second, third)
        await a.aclose()
        await b.aclose()
        return results

    ran, waited, skipped = asyncio.run(asyncio.wait_for(scenario(), PATIENCE))
    assert [r.verdict for r in (ran, waited, skipped)] == [
        Verdict.SUCCEEDED,
        Verdict.SUCCEEDED,
        Verdict.OVERLAPPING,
    ]
    records = {r.instant: r.state for r in history.runs(described.target)}
    assert records[T0 + 2 * MINUTE] is RunState.SKIPPED


def test_runs_shows_a_buffered_record_and_a_cancelled_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("firefly_scheduling_database")
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    url = f"sqlite:///{tmp_path / 'history.db'}"
    history = SqlRunHistory(url)
    try:
        history.install()
        assert history.buffer("app:job", T0, lock="app:job", node="n1", reason="waits", at=T0)
        history.start("app:job", T0 - MINUTE, lock="app:job", node="n2", token=3, at=T0)
        assert history.finish(
            "app:job",
            T0 - MINUTE,
            lock="app:job",
            token=3,
            state=RunState.CANCELLED,
            error="asked",
            at=T0,
        )
    finally:
        history.close()
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", url)
    listed = CliRunner().invoke(main, ["runs", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = [json.loads(line) for line in listed.output.splitlines()]
    assert [(row["state"], row["error"], row["node"]) for row in rows] == [
        ("buffered", "waits", "n1"),
        ("cancelled", "asked", "n2"),
    ]
    table = CliRunner().invoke(main, ["runs"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "buffered" in table.output
    assert "cancelled" in table.output


def test_buffer_all_runs_every_waiting_fire_oldest_first_whatever_order_they_came_in() -> None:
    history = MemoryRunHistory()
    described = task("buffer_all")
    a, b = node("a", history), node("b", history)
    release = threading.Event()
    started: list[int] = []

    def body(number: int) -> Callable[[], object]:
        def run() -> None:
            started.append(number)
            if number == 1:
                assert release.wait(PATIENCE)

        return run

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(a.run, Fire.at(described, T0), body(1))
        until(lambda: started == [1], "the first fire never ran")
        waiting = []
        for number in (4, 3, 2):  # the newest comes first
            at = T0 + (number - 1) * MINUTE
            runner = a if number % 2 else b
            waiting.append(pool.submit(runner.run, Fire.at(described, at), body(number)))
            until(
                lambda at=at: state_of(history, described.target, at) is RunState.BUFFERED,
                f"fire {number} was never buffered",
            )
        release.set()
        results = [first.result(PATIENCE), *(each.result(PATIENCE) for each in waiting)]
    assert [result.verdict for result in results] == [Verdict.SUCCEEDED] * 4
    assert started == [1, 2, 3, 4]
    states = {r.instant: r.state for r in history.runs(described.target)}
    assert set(states.values()) == {RunState.SUCCEEDED}


def test_buffer_all_skips_a_fire_past_its_bound_and_records_why() -> None:
    history = MemoryRunHistory()
    described = task("buffer_all")
    nodes = [node(name, history) for name in ("a", "b")]
    release = threading.Event()
    bound = BUFFER_ALL_MAX_WAITING
    with ThreadPoolExecutor(bound + 1) as pool:
        first = pool.submit(nodes[0].run, Fire.at(described, T0), lambda: release.wait(PATIENCE))
        until(lambda: state_of(history, described.target, T0) is RunState.RUNNING, "no run")
        waiting = [
            pool.submit(nodes[n % 2].run, Fire.at(described, T0 + n * MINUTE), lambda: None)
            for n in range(1, bound + 1)
        ]
        until(
            lambda: (
                sum(r.state is RunState.BUFFERED for r in history.runs(described.target, limit=100))
                == bound
            ),
            "the queue never filled",
        )
        over = nodes[1].run(Fire.at(described, T0 + (bound + 1) * MINUTE), lambda: None)
        release.set()
        ran = [first.result(PATIENCE), *(each.result(PATIENCE) for each in waiting)]
    assert {result.verdict for result in ran} == {Verdict.SUCCEEDED}
    assert over.verdict is Verdict.OVERLAPPING
    [record] = [
        r for r in history.runs(described.target, limit=100) if r.instant == over.fire.instant
    ]
    assert (record.state, record.error) == (RunState.SKIPPED, QUEUE_FULL)
    assert f"{bound} fires of the task are already buffered" in QUEUE_FULL


def cancel_task() -> ScheduledDescriptor:
    """A `cancel_other` task whose runs are watched every 0.2 s (a third of its TTL)."""
    target = f"tests.overlap_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(
        target=target, lock_name=target, lock_ttl=0.6, fixed_rate=60.0, overlap="cancel_other"
    )


def test_cancel_other_tells_a_plain_body_to_stop_then_runs_the_newer_fire() -> None:
    history = MemoryRunHistory()
    described = cancel_task()
    a, b = node("a", history), node("b", history)
    seen: list[str] = []

    def running_body() -> None:
        context = current_fire()
        assert context is not None
        seen.append("started")
        give_up = time.monotonic() + PATIENCE
        while not context.cancel_requested:
            assert time.monotonic() < give_up, "the body was never asked to stop"
            time.sleep(0.01)
        seen.append("asked to stop")
        assert may_return.wait(PATIENCE)  # a plain body stops when it can

    may_return = threading.Event()
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(a.run, Fire.at(described, T0), running_body)
        until(lambda: seen == ["started"], "the first fire never ran")
        newer = pool.submit(b.run, Fire.at(described, T0 + MINUTE), lambda: seen.append("newer"))
        until(lambda: "asked to stop" in seen, "the request never reached the body")
        third = a.run(Fire.at(described, T0 + 2 * MINUTE), lambda: seen.append("third"))
        may_return.set()
        stopped, replaced = first.result(PATIENCE), newer.result(PATIENCE)
    assert seen == ["started", "asked to stop", "newer"]
    assert third.verdict is Verdict.OVERLAPPING  # one fire at a time waits to replace a run
    assert stopped.verdict is Verdict.CANCELLED
    assert stopped.error == CANCELLED_BY_A_NEWER_FIRE
    assert replaced.verdict is Verdict.SUCCEEDED
    assert replaced.buffered_seconds is not None
    records = {r.instant: (r.state, r.error) for r in history.runs(described.target)}
    assert records == {
        T0: (RunState.CANCELLED, CANCELLED_BY_A_NEWER_FIRE),
        T0 + MINUTE: (RunState.SUCCEEDED, None),
        T0 + 2 * MINUTE: (RunState.SKIPPED, ANOTHER_FIRE_REPLACES),
    }


def test_cancel_other_cancels_a_coroutine_body_on_the_asyncio_runner() -> None:
    history = MemoryRunHistory()
    described = cancel_task()

    async def scenario() -> tuple[FireResult, FireResult, FireResult, list[str]]:
        a = AsyncFireRunner(AsyncInMemoryLock(), history=history, clock=lambda: T0, node="a")
        b = AsyncFireRunner(AsyncInMemoryLock(), history=history, clock=lambda: T0, node="b")
        seen: list[str] = []

        async def long_body() -> None:
            seen.append("started")
            try:
                await asyncio.sleep(PATIENCE)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        async def newer_body() -> None:
            seen.append("newer")

        first = asyncio.create_task(a.run(Fire.at(described, T0), long_body))
        while seen != ["started"]:
            await asyncio.sleep(0.01)
        newer = asyncio.create_task(b.run(Fire.at(described, T0 + MINUTE), newer_body))
        results = (await first, await newer, seen)
        await a.aclose()
        await b.aclose()
        return results

    stopped, replaced, seen = asyncio.run(asyncio.wait_for(scenario(), PATIENCE))
    assert seen == ["started", "cancelled", "newer"]
    assert (stopped.verdict, stopped.error) == (Verdict.CANCELLED, CANCELLED_BY_A_NEWER_FIRE)
    assert replaced.verdict is Verdict.SUCCEEDED
    states = {r.instant: r.state for r in history.runs(described.target)}
    assert states == {T0: RunState.CANCELLED, T0 + MINUTE: RunState.SUCCEEDED}


def test_cancel_other_cancels_a_coroutine_body_run_by_a_threaded_host() -> None:
    history = MemoryRunHistory()
    described = cancel_task()
    a, b = node("a", history), node("b", history)
    seen: list[str] = []

    async def long_body() -> None:
        seen.append("started")
        try:
            await asyncio.sleep(PATIENCE)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    coroutines = CoroutineLoop()
    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(
                a.run, Fire.at(described, T0), lambda: call_task(long_body, coroutines)
            )
            until(lambda: seen == ["started"], "the first fire never ran")
            newer = pool.submit(
                b.run, Fire.at(described, T0 + MINUTE), lambda: seen.append("newer")
            )
            stopped, replaced = first.result(PATIENCE), newer.result(PATIENCE)
    finally:
        coroutines.close()
    assert seen == ["started", "cancelled", "newer"]
    assert (stopped.verdict, replaced.verdict) == (Verdict.CANCELLED, Verdict.SUCCEEDED)


def test_a_run_of_a_task_that_cannot_be_asked_to_stop_never_sees_the_request() -> None:
    history = MemoryRunHistory()
    flags: list[bool] = []

    def body() -> None:
        context = current_fire()
        assert context is not None
        flags.append(context.cancel_requested)

    node("a", history).run(Fire.at(task("buffer_one"), T0), body)
    assert flags == [False]
