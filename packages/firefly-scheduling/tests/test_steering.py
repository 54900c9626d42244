"""Triggers and backfills on the `tick` and asyncio hosts and from the CLI, in-process.

The multi-node guarantees are proven on real servers (tests-integration,
`test_steering_nodes`); here, what one pass does and what the commands refuse.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import types
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks
from firefly_fake_clock import FakeClock

from firefly_scheduling import ScheduledDescriptor, Settings, current_fire
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.cli import main
from firefly_scheduling.control.memory import MemoryControlStore
from firefly_scheduling.control.memory_async import AsyncMemoryControlStore
from firefly_scheduling.control.records import RecordKind
from firefly_scheduling.control.triggers import backfill, trigger
from firefly_scheduling.control.triggers_async import trigger as atrigger
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.backfill_plan import MAX_BACKFILL_INSTANTS, schedule_instants
from firefly_scheduling.fires.outcome import TriggerKind, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.history import MemoryRunHistory, RunHistory, RunState
from firefly_scheduling.hosts.asyncio_host import AsyncHost
from firefly_scheduling.hosts.runtime.asyncio_runtime import AsyncTaskRuntime
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.runtime.steering_async import POLL_SECONDS
from firefly_scheduling.hosts.runtime.steering_store import steering_store
from firefly_scheduling.hosts.runtime.task_runtime import Lazy
from firefly_scheduling.hosts.tick import TickHost
from firefly_scheduling.initial_delay import InitialDelayGate, MemoryAnchorStore
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.validation import validate_descriptor

MODULE = "firefly_host_unit_tasks"
MINUTE = datetime(2026, 6, 3, 12, 0, 30, tzinfo=UTC)
DEMO = "firefly_scheduling.demo_app"
HEARTBEAT = "firefly_scheduling.demo_app.tasks:heartbeat"


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    tasks.reset()
    yield
    tasks.reset()


def _settings() -> Settings:
    return Settings(
        lock_provider="memory",
        history_url="memory://",
        control_url=f"memory://steering-{uuid.uuid4().hex}",
    )


def _tick(descriptor: ScheduledDescriptor, settings: Settings) -> TickHost:
    runtime = build_runtime([descriptor], settings, host="tick", node="t")
    return TickHost(
        [descriptor], runtime, clock=FakeClock(MINUTE), control=steering_store(settings)
    )


@dataclass
class _Backfilled:
    """A tick host of a task every minute, its history, and the instants to backfill."""

    settings: Settings
    descriptor: ScheduledDescriptor
    instants: list[datetime]
    host: TickHost
    history: RunHistory
    lock: str

    @classmethod
    def of(cls, minutes: int, **schedule: object) -> _Backfilled:
        """Every minute (`schedule`, by default a fixed rate of 60 s) from 2026-06-01."""
        settings = _settings()
        descriptor = _stamped(**(schedule or {"fixed_rate": 60.0}))
        start = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)
        host = _tick(descriptor, settings)
        history = host.runtime.fire_runner.get().history
        assert history is not None
        assert descriptor.lock_name is not None
        instants = [start + timedelta(minutes=n) for n in range(minutes)]
        return cls(settings, descriptor, instants, host, history, descriptor.lock_name)


def _stamped(**schedule: object) -> ScheduledDescriptor:
    lock = f"steering-{uuid.uuid4().hex[:8]}"
    return validate_descriptor(
        ScheduledDescriptor(target=f"{MODULE}:stamped", lock_name=lock, lock_ttl=30.0, **schedule)  # type: ignore[arg-type]
    )


def test_a_tick_pass_runs_a_pending_trigger_once_as_a_manual_fire() -> None:
    settings = _settings()
    descriptor = _stamped(cron="0 0 1 1 *")  # never due in the pass
    store = steering_store(settings)
    assert store is not None
    asked = trigger(store, descriptor.target, by="alice")
    first = _tick(descriptor, settings)
    report = first.run()
    [result] = report.results
    assert (result.verdict, result.fire.trigger) == (Verdict.SUCCEEDED, TriggerKind.MANUAL)
    assert result.instant == datetime.fromtimestamp(asked.requested_at, UTC)
    [(instant, _)] = tasks.STAMPED
    assert instant == result.instant
    assert store.triggers() == []
    history = first.runtime.fire_runner.get().history
    assert history is not None
    [record] = history.runs(descriptor.target)
    assert (record.trigger, record.state, record.requested_by) == (
        "manual",
        RunState.SUCCEEDED,
        "alice",
    )
    assert _tick(descriptor, settings).run().results == []  # taken once


class _TakenAmiss(MemoryControlStore):
    """A memory store whose first removal of a trigger goes amiss: made, then its reply
    lost (`lose_reply`), or with the host told to stop meanwhile (`stop`)."""

    driver_errors = (OSError,)

    def __init__(self, url: str, *, lose_reply: bool = False) -> None:
        super().__init__(url)
        self.lose_reply = lose_reply
        self.stop: TickHost | None = None
        self.amiss = 0

    def _delete(self, kind: RecordKind, key: str) -> bool:
        removed = super()._delete(kind, key)
        if kind != "trigger" or self.amiss:
            return removed
        self.amiss += 1
        if self.stop is not None:
            self.stop.runtime.stop_accepting()
        if self.lose_reply:
            raise OSError("connection reset: the reply was lost")
        return removed


@pytest.mark.parametrize("amiss", ["lost reply", "stop"])
def test_a_trigger_taken_amiss_still_runs_once(amiss: str) -> None:
    """Nothing lost: a trigger out of the store has run (or is recorded with why)."""
    settings = _settings()
    descriptor = _stamped(cron="0 0 1 1 *")  # never due in the pass
    store = _TakenAmiss(settings.control_url, lose_reply=amiss == "lost reply")
    asked = trigger(store, descriptor.target, by="alice")
    runtime = build_runtime([descriptor], settings, host="tick", node="t")
    host = TickHost([descriptor], runtime, clock=FakeClock(MINUTE), control=store)
    if amiss == "stop":
        store.stop = host
    host.run()
    assert store.amiss == 1
    history = runtime.fire_runner.get().history
    assert history is not None
    records = history.runs(descriptor.target)
    assert [(r.instant, r.trigger, r.state) for r in records] == [
        (datetime.fromtimestamp(asked.requested_at, UTC), "manual", RunState.SUCCEEDED)
    ], "the trigger left the store, and never ran"
    assert [instant for instant, _ in tasks.STAMPED] == [records[0].instant]


def test_a_tick_pass_backfills_the_missing_instants_oldest_first_then_nothing() -> None:
    case = _Backfilled.of(10)
    settings, descriptor, instants = case.settings, case.descriptor, case.instants
    host, history, lock = case.host, case.history, case.lock
    start = instants[0]
    history.record_run(
        descriptor.target,
        instants[3],
        lock=lock,
        node="earlier",
        token=None,
        state=RunState.SUCCEEDED,
        error=None,
        started_at=instants[3],
        ended_at=instants[3],
    )
    history.start(
        descriptor.target,
        instants[5],
        lock=lock,
        node="earlier",
        token=None,
        at=instants[5],
    )
    history.finish(
        descriptor.target,
        instants[5],
        lock=lock,
        token=None,
        state=RunState.FAILED,
        error="boom",
        at=instants[5],
    )
    store = host.control
    assert store is not None
    backfill(
        store,
        descriptor.target,
        start,
        instants[-1] + timedelta(seconds=1),
        by="bob",
        settings=settings,
    )
    report = host.run()
    expected = [instant for instant in instants if instant != instants[3]]
    backfilled = [r for r in report.results if r.fire.trigger is TriggerKind.BACKFILL]
    assert [r.instant for r in backfilled] == expected
    assert [
        instant for instant, _ in tasks.STAMPED if instant < MINUTE.replace(second=0)
    ] == expected
    records = {r.instant: r for r in history.runs(descriptor.target, limit=100)}
    assert {records[i].trigger for i in expected if i != instants[5]} == {"backfill"}
    assert records[instants[3]].trigger == "scheduled"
    rerun = records[instants[5]]
    assert (rerun.state, rerun.attempt, rerun.trigger) == (RunState.SUCCEEDED, 2, "scheduled")
    assert store.backfills() == []
    backfill(
        store,
        descriptor.target,
        start,
        instants[-1] + timedelta(seconds=1),
        by="bob",
        settings=settings,
    )
    # The same runtime, so the same (in-process) history.
    again = TickHost([descriptor], host.runtime, clock=FakeClock(MINUTE), control=store).run()
    assert [r for r in again.results if r.fire.trigger is TriggerKind.BACKFILL] == []
    assert store.backfills() == []


def test_a_backfill_leaves_an_instant_whose_run_expired_or_still_runs() -> None:
    """Its body may have run to its end (or still runs): a replay would run it again as
    the same attempt, once a run of the task closed the record as `expired`. The task
    fires at midnight's hour only: no fire of the pass closes the record first."""
    case = _Backfilled.of(4, cron="* 0 * * *")
    target, instants = case.descriptor.target, case.instants
    for instant in instants[1:3]:
        case.history.start(target, instant, lock=case.lock, node="died", token=None, at=instant)
    assert case.history.expire_dead(instants[2], at=instants[3]) == 1  # instants[1]'s
    store = case.host.control
    assert store is not None
    end = instants[-1] + timedelta(seconds=1)
    backfill(store, target, instants[0], end, by="bob", settings=case.settings)
    report = case.host.run()
    backfilled = [r.instant for r in report.results if r.fire.trigger is TriggerKind.BACKFILL]
    assert backfilled == [instants[0], instants[3]]
    records = {r.instant: r for r in case.history.runs(target, limit=100)}
    assert (records[instants[1]].state, records[instants[1]].attempt) == (RunState.EXPIRED, 1)
    assert records[instants[2]].attempt == 1
    assert records[instants[2]].state in {RunState.RUNNING, RunState.EXPIRED}
    assert store.backfills() == [], "the request stays although every instant has a run"


def test_a_backfill_without_a_history_is_refused_before_it_is_stored() -> None:
    settings = Settings(
        lock_provider="memory", history_url="off", control_url=f"memory://{uuid.uuid4().hex}"
    )
    store = steering_store(settings)
    assert store is not None
    start = datetime(2026, 6, 1, tzinfo=UTC)
    with pytest.raises(ConfigurationError, match="needs a run history"):
        backfill(store, HEARTBEAT, start, start + timedelta(hours=1), by="x", settings=settings)
    assert store.backfills() == []


def test_the_schedule_instants_of_a_window_and_its_limits() -> None:
    start = datetime(2026, 6, 1, tzinfo=UTC)
    cron = ScheduledDescriptor(target=f"{MODULE}:ping", cron="*/15 * * * *")
    assert schedule_instants(cron, start, start + timedelta(hours=1)) == [
        start + timedelta(minutes=m) for m in (0, 15, 30, 45)
    ]
    with pytest.raises(ConfigurationError, match="fixed_delay"):
        schedule_instants(
            ScheduledDescriptor(target=f"{MODULE}:ping", fixed_delay=60.0),
            start,
            start + timedelta(hours=1),
        )
    every_second = ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=1.0)
    with pytest.raises(ConfigurationError, match=str(MAX_BACKFILL_INSTANTS)):
        schedule_instants(every_second, start, start + timedelta(days=2))


def test_a_host_without_a_durable_control_store_boots_without_steering(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The one message is the fire runner's pause reader's (tests/test_fires_pause.py).
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling.hosts"):
        assert steering_store(Settings(lock_provider="memcached")) is None
    assert caplog.records == []


# -- the commands ----------------------------------------------------------------------


def _env(**more: str) -> dict[str, str]:
    return {
        "FIREFLY_SCHEDULING_LOCK_PROVIDER": "memory",
        "FIREFLY_SCHEDULING_HISTORY_URL": "memory://",
        "FIREFLY_SCHEDULING_CONTROL_URL": f"memory://cli-{uuid.uuid4().hex}",
        **more,
    }


def test_trigger_stores_one_pending_trigger_and_prints_it() -> None:
    env = _env()
    result = CliRunner().invoke(
        main, ["trigger", HEARTBEAT, "--app", DEMO, "--by", "alice", "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.output.splitlines()]
    assert (row["task"], row["by"]) == (HEARTBEAT, "alice")
    [pending] = MemoryControlStore(env["FIREFLY_SCHEDULING_CONTROL_URL"]).triggers()
    assert (pending.task, pending.by, pending.id) == (HEARTBEAT, "alice", row["id"])


def test_trigger_of_an_unknown_task_exits_2_naming_it() -> None:
    env = _env()
    result = CliRunner().invoke(main, ["trigger", f"{DEMO}.tasks:nope", "--app", DEMO], env=env)
    assert result.exit_code == 2, result.output
    assert f"unknown task '{DEMO}.tasks:nope'" in result.output
    assert MemoryControlStore(env["FIREFLY_SCHEDULING_CONTROL_URL"]).triggers() == []


@pytest.mark.parametrize(
    ("start", "end", "words"),
    [
        (
            "2026-06-01T00:00:00",
            "2026-06-01T01:00:00Z",
            "--from '2026-06-01T00:00:00' has no time zone",
        ),
        ("2026-06-01T00:00:00Z", "2026-06-01 01:00", "--to '2026-06-01 01:00' has no time zone"),
        ("yesterday", "2026-06-01T01:00:00Z", "--from 'yesterday' is not an ISO-8601 time"),
        ("2026-06-01T01:00:00Z", "2026-06-01T01:00:00+00:00", "must not be empty"),
    ],
)
def test_backfill_refuses_a_bad_window_with_exit_2(start: str, end: str, words: str) -> None:
    env = _env()
    result = CliRunner().invoke(
        main, ["backfill", HEARTBEAT, "--from", start, "--to", end, "--app", DEMO], env=env
    )
    assert result.exit_code == 2, result.output
    assert words in result.output
    assert MemoryControlStore(env["FIREFLY_SCHEDULING_CONTROL_URL"]).backfills() == []


def test_backfill_stores_the_request_with_its_instants() -> None:
    env = _env()
    window = ["--from", "2026-06-01T02:00:00+02:00", "--to", "2026-06-01T00:01:00Z"]
    result = CliRunner().invoke(
        main, ["backfill", HEARTBEAT, *window, "--app", DEMO, "--by", "bob", "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    [row] = [json.loads(line) for line in result.output.splitlines()]
    assert (row["start"], row["end"], row["by"], row["instants"]) == (
        "2026-06-01T00:00:00+00:00",
        "2026-06-01T00:01:00+00:00",
        "bob",
        60,
    )
    [stored] = MemoryControlStore(env["FIREFLY_SCHEDULING_CONTROL_URL"]).backfills()
    assert (stored.task, stored.by) == (HEARTBEAT, "bob")


def test_backfill_of_an_unlocked_task_exits_2() -> None:
    result = CliRunner().invoke(
        main,
        [
            *("backfill", f"{DEMO}.tasks:tidy_up", "--app", DEMO),
            *("--from", "2026-06-01T00:00:00Z", "--to", "2026-06-01T01:00:00Z"),
        ],
        env=_env(),
    )
    assert result.exit_code == 2, result.output
    assert "lock=False" in result.output


def test_the_asyncio_host_runs_a_trigger_within_its_poll_and_once() -> None:
    """Two asyncio hosts on one loop share a lock and a control store, as two nodes would."""
    module = types.ModuleType("firefly_aio_steered")
    runs: list[datetime] = []

    async def report() -> None:
        fire = current_fire()
        assert fire is not None
        runs.append(fire.instant)

    module.report = report  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    task = ScheduledDescriptor(
        target="firefly_aio_steered:report",
        cron="0 0 1 1 *",
        lock_name=f"steered-{uuid.uuid4().hex[:8]}",
        lock_ttl=5.0,
    )
    url = f"memory://aio-{uuid.uuid4().hex}"
    history = MemoryRunHistory()

    async def scenario() -> float:
        lock = AsyncInMemoryLock()
        hosts = [
            AsyncHost(
                [task], _async_runtime(lock, history, node), control=AsyncMemoryControlStore(url)
            )
            for node in ("a", "b")
        ]
        for host in hosts:
            host.start()
        loop = asyncio.get_running_loop()
        asked = loop.time()
        await atrigger(AsyncMemoryControlStore(url), task.target, by="alice")
        while not runs:
            assert loop.time() - asked < 5.0
            await asyncio.sleep(0.01)
        took = loop.time() - asked
        await asyncio.sleep(3 * POLL_SECONDS)
        for host in hosts:
            assert await host.stop() == []
        return took

    try:
        took = asyncio.run(scenario())
    finally:
        del sys.modules[module.__name__]
    assert took < 2.0, "a trigger runs within 2 s of being asked"
    assert len(runs) == 1
    [record] = history.runs(task.target)
    assert (record.instant, record.trigger, record.state) == (runs[0], "manual", RunState.SUCCEEDED)


def _async_runtime(
    lock: AsyncInMemoryLock, history: MemoryRunHistory, node: str
) -> AsyncTaskRuntime:
    return AsyncTaskRuntime(
        lock=Lazy.of(lock),
        gate=Lazy(lambda: InitialDelayGate(MemoryAnchorStore())),
        node=node,
        fire_runner=lambda built: AsyncFireRunner(built.lock.get(), history=history, node=node),
    )


def test_the_newest_records_a_starting_node_reads_leave_out_operator_fires() -> None:
    """A node's first fire reads the task's newest records to name the fires nobody ran
    since (`hosts.apscheduler.jobs`): a backfilled instant of the past, or a manual
    fire off the schedule, written now, must not make it count every minute since the
    backfilled night as passed over."""
    descriptor = _stamped(fixed_rate=60.0)
    assert descriptor.lock_name is not None
    history = MemoryRunHistory()
    runner = FireRunner(InMemoryLock(), history=history, node="n")
    scheduled_at = datetime(2026, 6, 3, 11, 0, tzinfo=UTC)
    backfilled_at = datetime(2026, 3, 1, tzinfo=UTC)
    manual_at = datetime(2026, 6, 3, 11, 30, 7, tzinfo=UTC)
    for instant, kind in (
        (scheduled_at, "scheduled"),
        (backfilled_at, "backfill"),
        (manual_at, "manual"),
    ):
        history.record_run(
            descriptor.target,
            instant,
            lock=descriptor.lock_name,
            node="n",
            token=None,
            state=RunState.SUCCEEDED,
            error=None,
            started_at=instant,
            ended_at=instant,
            trigger=kind,
        )
    assert runner.recent_recorded_instants(descriptor, 10) == [scheduled_at]
