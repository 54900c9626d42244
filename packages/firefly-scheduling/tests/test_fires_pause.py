"""Pause in the fire path (`fires.pausing`, `FirePolicy.before_start`), in one process.

A runner given a pause reader skips the fires of a paused task after winning their
claim, before their start: the history says `skipped`, reason `paused`, and the body
never runs. The fleet-wide pause holds every task; a manual fire runs anyway; resume
lets the next fire run; a store that cannot be read skips the fire (fail closed);
a fire claimed with a batch is checked too. Real servers and real nodes:
`tests-integration/test_pause_nodes.py`; one read per batch:
`tests-integration/test_pause_batch_reads.py`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from firefly_scheduling import ScheduleControl
from firefly_scheduling.aio import AsyncInMemoryLock, AsyncScheduleControl
from firefly_scheduling.control.memory import MemoryControlStore
from firefly_scheduling.control.memory_async import AsyncMemoryControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.catch_up_plan import plan_catch_up, window_start
from firefly_scheduling.fires.outcome import Fire, TriggerKind, Verdict
from firefly_scheduling.fires.pausing import PauseReader, pause_reader
from firefly_scheduling.fires.pausing_async import AsyncPauseReader
from firefly_scheduling.fires.policy import (
    DEFAULT_POLICY,
    PAUSE_UNKNOWN,
    PAUSED,
    RUN,
    BeforeStart,
)
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_descriptor

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def task() -> ScheduledDescriptor:
    target = f"tests.pause_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=target, lock_name=target, lock_ttl=30.0, fixed_rate=1.0)


def fleet() -> tuple[ScheduleControl, MemoryControlStore, str]:
    """An operator's control and a node's store on one fresh `memory://` table."""
    url = f"memory://pause-{uuid.uuid4().hex}"
    store = MemoryControlStore(url)
    return ScheduleControl(store=MemoryControlStore(url)), store, url


def node(store: MemoryControlStore, history: MemoryRunHistory, now: datetime) -> FireRunner:
    return FireRunner(InMemoryLock(), history=history, clock=lambda: now, pauses=PauseReader(store))


class TestARuntimeScheduleIsPausedByItsName:
    def test_pause_status_and_resume_take_the_name_and_its_fire_is_skipped(self) -> None:
        control, store, _ = fleet()
        target = task().target
        assert control.add_schedule(
            "nightly-export", target, fixed_rate="1s", by="ops@test", allowed={target}
        )
        [schedule] = store.schedules()
        # What a node runs: the schedule's descriptor under its name (control.runtime_tasks).
        runtime_task = replace(schedule.descriptor, target=schedule.name)
        history = MemoryRunHistory()
        control.pause("nightly-export", note="vendor down", by="ops@test")
        assert control.status("nightly-export").of("nightly-export").paused
        fire = Fire.at(runtime_task, T0, TriggerKind.RUNTIME)
        assert node(store, history, T0).run(fire, lambda: None).verdict is Verdict.PAUSED
        [record] = history.runs("nightly-export", 10)
        assert (record.state, record.error, record.trigger) == (
            RunState.SKIPPED,
            "paused",
            "runtime",
        )
        assert control.resume("nightly-export")
        later = Fire.at(runtime_task, T0 + SECOND, TriggerKind.RUNTIME)
        assert node(store, history, T0 + SECOND).run(later, lambda: None).verdict.ran

    def test_a_name_no_schedule_could_have_is_refused_naming_it(self) -> None:
        control, _, _ = fleet()
        with pytest.raises(ConfigurationError, match="'not a name' is not importable"):
            control.pause("not a name", by="ops@test")
        with pytest.raises(ConfigurationError, match="is not importable"):
            control.trigger("nightly-export", by="ops@test")  # a trigger names a task target


class TestAPausedTaskIsSkipped:
    def test_its_fire_is_recorded_skipped_paused_and_its_body_never_runs(self) -> None:
        control, store, _ = fleet()
        history = MemoryRunHistory()
        descriptor = task()
        control.pause(descriptor.target, note="incident", by="ops@test")
        ran: list[datetime] = []
        result = node(store, history, T0).run(Fire.at(descriptor, T0), lambda: ran.append(T0))
        assert (result.verdict, result.error, ran) == (Verdict.PAUSED, PAUSED, [])
        [record] = history.runs(descriptor.target, 10)
        assert (record.state, record.error) == (RunState.SKIPPED, "paused")

    def test_another_task_runs(self) -> None:
        control, store, _ = fleet()
        control.pause(task().target, by="ops@test")
        result = node(store, MemoryRunHistory(), T0).run(Fire.at(task(), T0), lambda: None)
        assert result.verdict is Verdict.SUCCEEDED

    def test_pause_all_holds_every_task_and_resume_all_lifts_it(self) -> None:
        control, store, _ = fleet()
        descriptor = task()
        control.pause_all(note="freeze", by="ops@test")
        runner = node(store, MemoryRunHistory(), T0)
        assert runner.run(Fire.at(descriptor, T0), lambda: None).verdict is Verdict.PAUSED
        assert control.status().all_tasks is not None
        assert control.status(descriptor.target).of(descriptor.target).all_tasks
        assert control.resume_all()
        later = node(store, MemoryRunHistory(), T0 + SECOND)
        assert later.run(Fire.at(descriptor, T0 + SECOND), lambda: None).verdict.ran

    def test_a_manual_fire_runs_while_its_task_is_paused(self) -> None:
        control, store, _ = fleet()
        descriptor = task()
        control.pause(descriptor.target, by="ops@test")
        fire = Fire.at(descriptor, T0, TriggerKind.MANUAL)
        assert node(store, MemoryRunHistory(), T0).run(fire, lambda: None).verdict.ran

    def test_resume_lets_the_next_fire_run_and_the_missed_one_stays_skipped(self) -> None:
        control, store, _ = fleet()
        history = MemoryRunHistory()
        descriptor = task()
        control.pause(descriptor.target, by="ops@test")
        missed = node(store, history, T0).run(Fire.at(descriptor, T0), lambda: None)
        assert control.resume(descriptor.target)
        after = node(store, history, T0 + SECOND).run(
            Fire.at(descriptor, T0 + SECOND), lambda: None
        )
        assert (missed.verdict, after.verdict) == (Verdict.PAUSED, Verdict.SUCCEEDED)
        states = {r.instant: (r.state, r.error) for r in history.runs(descriptor.target, 10)}
        assert states == {
            T0: (RunState.SKIPPED, "paused"),
            T0 + SECOND: (RunState.SUCCEEDED, None),
        }

    def test_a_fire_due_while_paused_that_starts_after_the_resume_is_skipped(self) -> None:
        # A late start: the fire's instant is inside the paused stretch, and its claim
        # and pause read come after the resume. Resume is from now: it is not run.
        control, store, _ = fleet()
        history = MemoryRunHistory()
        descriptor = task()
        control.pause(descriptor.target, by="ops@test")
        due = datetime.now(UTC)  # the store's clock is this host's: after the pause
        assert control.resume(descriptor.target)
        ran: list[TriggerKind] = []
        late = node(store, history, due + SECOND)
        result = late.run(Fire.at(descriptor, due), lambda: ran.append(TriggerKind.SCHEDULED))
        assert (result.verdict, result.error, ran) == (Verdict.PAUSED, PAUSED, [])
        # The stretch skips the schedule's fires only: an operator's replay would run.
        [stretch] = store.pause_state().lifted
        replay = Fire.at(descriptor, due, TriggerKind.BACKFILL)
        assert DEFAULT_POLICY.before_start(replay, BeforeStart(lifted=stretch)) is RUN
        next_due = datetime.now(UTC) + SECOND
        after = node(store, history, next_due).run(
            Fire.at(descriptor, next_due), lambda: ran.append(TriggerKind.SCHEDULED)
        )
        assert after.verdict is Verdict.SUCCEEDED
        assert ran == [TriggerKind.SCHEDULED]

    def test_the_fires_skipped_while_paused_are_not_caught_up_after_resume(self) -> None:
        control, store, _ = fleet()
        history = MemoryRunHistory()
        target = task().target
        descriptor = validate_descriptor(
            ScheduledDescriptor(
                target=target, lock_name=target, lock_ttl=30.0, fixed_rate=1.0, catchup=60.0
            )
        )
        control.pause(target, by="ops@test")
        for second in range(5):
            at = T0 + second * SECOND
            node(store, history, at).run(Fire.at(descriptor, at), lambda: None)
        control.resume(target)
        now = T0 + 4 * SECOND
        recorded = history.recorded_instants(
            target, lock=target, after=window_start(descriptor, now), until=now
        )
        plan = plan_catch_up(descriptor, now, recorded)
        paused = {T0 + second * SECOND for second in range(5)}
        assert paused <= recorded
        assert paused.isdisjoint(plan.run)  # not even with catchup=: each is recorded
        assert {r.error for r in history.runs(target, 10)} == {"paused"}

    def test_a_fire_claimed_ahead_with_its_batch_is_skipped_too(self) -> None:
        control, store, _ = fleet()
        history = MemoryRunHistory()
        paused, running = task(), task()
        control.pause(paused.target, by="ops@test")
        runner = node(store, history, T0)
        fires = [Fire.at(paused, T0), Fire.at(running, T0)]
        claims = runner.claim_fires(fires)
        verdicts = [
            runner.run(fire, lambda: None, claim=claim).verdict
            for fire, claim in zip(fires, claims, strict=True)
        ]
        assert verdicts == [Verdict.PAUSED, Verdict.SUCCEEDED]
        [record] = history.runs(paused.target, 10)
        assert (record.state, record.error) == (RunState.SKIPPED, "paused")


class TestAStoreThatFailsFailsClosed:
    def test_the_fire_is_skipped_with_the_stores_error(self) -> None:
        # A real client against a port nobody listens on: connection refused.
        pytest.importorskip("firefly_scheduling_redis")
        settings = Settings(lock_provider="memory", control_url="redis://127.0.0.1:1/0")
        reader = pause_reader(settings)
        assert reader is not None
        history = MemoryRunHistory()
        descriptor = task()
        runner = FireRunner(InMemoryLock(), history=history, clock=lambda: T0, pauses=reader)
        try:
            result = runner.run(Fire.at(descriptor, T0), lambda: None)
        finally:
            runner.close()
        assert result.verdict is Verdict.BACKEND_ERROR
        assert result.error is not None
        assert result.error.startswith(PAUSE_UNKNOWN)
        [record] = history.runs(descriptor.target, 10)
        assert record.state is RunState.SKIPPED


class TestWithoutADurableStore:
    def test_a_host_warns_once_and_checks_nothing(self, caplog: pytest.LogCaptureFixture) -> None:
        pytest.importorskip("firefly_scheduling_memcached")
        settings = Settings(lock_provider="memcached")
        with caplog.at_level(logging.INFO, logger="firefly_scheduling.fires"):
            assert pause_reader(settings) is None
        [warning] = [r for r in caplog.records if "durable control store" in r.getMessage()]
        assert warning.levelno == logging.WARNING
        assert "FIREFLY_SCHEDULING_CONTROL_URL" in warning.getMessage()

    def test_an_in_process_lock_says_so_at_info(self, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level(logging.INFO, logger="firefly_scheduling.fires"):
            assert pause_reader(Settings(lock_provider="none")) is None
        [line] = [r for r in caplog.records if "durable control store" in r.getMessage()]
        assert line.levelno == logging.INFO

    def test_schedule_control_refuses_naming_the_setting(self) -> None:
        with pytest.raises(ConfigurationError, match="FIREFLY_SCHEDULING_CONTROL_URL"):
            ScheduleControl(Settings(lock_provider="memory"))

    def test_a_control_url_set_but_unusable_is_refused_at_boot(self) -> None:
        with pytest.raises(ConfigurationError, match="nosuch"):
            pause_reader(Settings(lock_provider="memory", control_url="nosuch://x"))


class TestTheAsyncioFlavour:
    def test_a_paused_task_is_skipped_and_resumed(self) -> None:
        url = f"memory://pause-{uuid.uuid4().hex}"
        descriptor = task()
        history = MemoryRunHistory()

        async def body() -> None:
            await asyncio.sleep(0)

        async def scenario() -> list[Verdict]:
            control = AsyncScheduleControl(store=AsyncMemoryControlStore(url))
            reader = AsyncPauseReader(AsyncMemoryControlStore(url))
            runner = AsyncFireRunner(
                AsyncInMemoryLock(), history=history, clock=lambda: T0, pauses=reader
            )
            await control.pause(descriptor.target, by="ops@test")
            first = await runner.run(Fire.at(descriptor, T0), body)
            await control.resume(descriptor.target)
            second = await runner.run(Fire.at(descriptor, T0 + SECOND / 2), body)
            return [first.verdict, second.verdict]

        assert asyncio.run(scenario()) == [Verdict.PAUSED, Verdict.SUCCEEDED]


class TestScheduleControl:
    def test_status_names_who_paused_when_and_why(self) -> None:
        control, _, _ = fleet()
        paused, running = task(), task()
        recorded = control.pause(paused.target, note="disk full", by="ops@test")
        status = control.status(tasks=[running.target])
        assert status.all_tasks is None
        assert [(s.target, s.paused, s.note, s.by, s.since) for s in status.tasks] == sorted(
            [
                (paused.target, True, "disk full", "ops@test", recorded.since),
                (running.target, False, "", "", None),
            ]
        )

    def test_by_defaults_to_login_at_host(self) -> None:
        control, _, _ = fleet()
        assert "@" in control.pause(task().target).by

    def test_a_bad_task_or_by_is_refused_naming_it(self) -> None:
        control, _, _ = fleet()
        with pytest.raises(ConfigurationError, match="not a target"):
            control.pause("not a target", by="ops@test")
        with pytest.raises(ConfigurationError, match="by must not be empty"):
            control.pause(task().target, by="  ")

    def test_add_schedule_takes_scheduleds_arguments_and_refuses_bad_ones(self) -> None:
        control, store, _ = fleet()
        target = task().target
        allowed = {target}
        assert control.add_schedule(
            "nightly", target, cron="0 3 * * *", by="ops@test", allowed=allowed
        )
        assert not control.add_schedule(
            "nightly", target, cron="0 3 * * *", by="ops@test", allowed=allowed
        )
        [schedule] = store.schedules()
        assert (schedule.descriptor.cron, schedule.descriptor.lock_name) == ("0 3 * * *", "nightly")
        with pytest.raises(ConfigurationError, match="exactly one of"):
            control.add_schedule("bad", target, by="ops@test", allowed=allowed)
        with pytest.raises(ConfigurationError, match="is not schedulable"):
            control.add_schedule("other", target, cron="0 3 * * *", by="ops@test", allowed=())
        assert control.remove_schedule("nightly")
