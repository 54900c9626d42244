"""`catchup=`/`catchup_limit=`: validation at boot, the plan of missed fires, the fire path.

The fleet-wide behaviour (two real nodes catching up on PostgreSQL) is in
tests-integration/test_catch_up_fleet.py; here, each piece on its own: what a valid
pair is and how a bad one is refused (naming the task and the value), which
instants a plan runs and which it records as skipped, a catch-up fire let through
beyond grace but not beyond its window, and a `tick` pass catching up on the
memory lock and history (its records, its telemetry).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks
from firefly_fake_clock import FakeClock

from firefly_scheduling import ConfigurationError, DurationError, ScheduledDescriptor, Settings
from firefly_scheduling.cli.schedule import schedule_json
from firefly_scheduling.fires.catch_up_plan import MAX_SKIPS_RECORDED, plan_catch_up
from firefly_scheduling.fires.catching_up import NO_CATCHUP_WINDOW
from firefly_scheduling.fires.outcome import Fire, TriggerKind, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history.memory import MemoryRunHistory
from firefly_scheduling.history.port import RunState
from firefly_scheduling.hosts.observation.telemetry import OpenTelemetry
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.runtime.catch_up_history import check_catch_up_history
from firefly_scheduling.hosts.tick import TickHost
from firefly_scheduling.locks.memory import InMemoryLock
from firefly_scheduling.tasks.decorator import descriptor_of, scheduled
from firefly_scheduling.tasks.manifest_format import decode, encode
from firefly_scheduling.tasks.validation import validate_descriptor

MODULE = "firefly_host_unit_tasks"
MINUTE = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
TARGET = "pkg.mod:f"


def _task(**fields: Any) -> ScheduledDescriptor:
    return ScheduledDescriptor(target=TARGET, lock_name=TARGET, **fields)


def _decorated(**arguments: Any) -> ScheduledDescriptor:
    def task() -> None:
        return None

    task.__module__, task.__qualname__ = "app.tasks", "task"
    descriptor = descriptor_of(scheduled(**arguments)(task))
    assert descriptor is not None
    return descriptor


# -- validation ----------------------------------------------------------------------


def test_catchup_is_a_duration_and_its_limit_defaults_to_100() -> None:
    descriptor = _decorated(fixed_rate="1m", catchup="1h")
    assert (descriptor.catchup, descriptor.catchup_limit) == (3600.0, 100)
    assert _decorated(cron="* * * * *", catchup=timedelta(days=7), catchup_limit=10_000) == (
        _decorated(cron="* * * * *", catchup="7d", catchup_limit=10_000)
    )
    plain = _decorated(fixed_rate="1m")
    assert (plain.catchup, plain.catchup_limit) == (None, None)


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ({"catchup": "0s"}, DurationError, "app.tasks:task catchup"),
        ({"catchup": "-5m"}, DurationError, "app.tasks:task catchup"),
        ({"catchup": "soon"}, DurationError, "app.tasks:task catchup: cannot read 'soon'"),
        ({"catchup": "400d"}, DurationError, "app.tasks:task catchup"),
        ({"catchup": "1h", "catchup_limit": True}, ConfigurationError, "catchup_limit=True"),
        ({"catchup": "1h", "catchup_limit": 0}, ConfigurationError, "catchup_limit=0"),
        ({"catchup": "1h", "catchup_limit": -3}, ConfigurationError, "catchup_limit=-3"),
        ({"catchup": "1h", "catchup_limit": 2.5}, ConfigurationError, "catchup_limit=2.5"),
        ({"catchup": "1h", "catchup_limit": "100"}, ConfigurationError, "catchup_limit='100'"),
        ({"catchup_limit": 10}, ConfigurationError, "catchup_limit=10 is given without catchup="),
    ],
)
def test_a_bad_catchup_is_refused_naming_the_task_and_the_value(
    arguments: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error) as refused:
        _decorated(fixed_rate="1m", **arguments)
    assert words in str(refused.value)
    assert "app.tasks:task" in str(refused.value)


def test_catchup_needs_a_locked_task_with_fires_every_node_names() -> None:
    with pytest.raises(ConfigurationError, match=r"app.tasks:task: catchup=3600.0 needs a cron"):
        _decorated(fixed_delay="1m", catchup="1h")
    with pytest.raises(ConfigurationError, match=r"app.tasks:task: catchup=3600.0 needs a locked"):
        _decorated(fixed_rate="1m", lock=False, catchup="1h")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"catchup": "1h"}, f"{TARGET} catchup: expected a number of seconds"),
        ({"catchup": 3600.0, "catchup_limit": False}, "catchup_limit=False"),
        ({"catchup_limit": 5}, "catchup_limit=5 is given without catchup="),
    ],
)
def test_a_manifest_descriptor_is_checked_the_same(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        validate_descriptor(_task(fixed_rate=60.0, **fields))
    assert words in str(refused.value)


def test_the_manifest_and_schedule_json_carry_the_fields() -> None:
    descriptor = validate_descriptor(_task(fixed_rate=60.0, catchup=7200, catchup_limit=250))
    _, [decoded] = decode(json.loads(encode([descriptor], ["pkg"])))
    assert (decoded.catchup, decoded.catchup_limit) == (7200.0, 250)
    row = schedule_json(descriptor, MINUTE)
    assert (row["catchup"], row["catchup_limit"]) == (7200.0, 250)
    plain = schedule_json(validate_descriptor(_task(fixed_rate=60.0)), MINUTE)
    assert (plain["catchup"], plain["catchup_limit"]) == (None, None)


def test_boot_refuses_catchup_without_a_history_naming_the_task_and_the_window() -> None:
    descriptor = validate_descriptor(_task(fixed_rate=60.0, catchup=7200))
    with pytest.raises(ConfigurationError) as refused:
        check_catch_up_history([descriptor], Settings(lock_provider="memory", history_url="off"))
    message = str(refused.value)
    assert f"{TARGET}: catchup='2h' needs a run history" in message
    assert "FIREFLY_SCHEDULING_HISTORY_URL=off" in message
    # A history configured: accepted.
    check_catch_up_history([descriptor], Settings(lock_provider="memory", history_url="memory://"))


# -- the plan --------------------------------------------------------------------------


def test_the_plan_runs_the_newest_missed_fires_oldest_first_and_skips_the_older() -> None:
    descriptor = validate_descriptor(_task(fixed_rate=60.0, catchup=600, catchup_limit=3))
    instants = [MINUTE - timedelta(minutes=back) for back in range(9, -1, -1)]  # 10 instants
    recorded = {instants[1], instants[8]}
    plan = plan_catch_up(descriptor, MINUTE, recorded)
    missed = [at for at in instants if at not in recorded]
    assert plan.missed == 8
    assert plan.run == tuple(missed[-3:])
    assert plan.skipped == tuple(missed[:-3])
    assert plan.skip_reason.startswith("skipped: beyond catchup_limit=3 of 8 missed fires")


def test_a_window_with_every_fire_recorded_plans_nothing() -> None:
    descriptor = validate_descriptor(_task(cron="*/5 * * * *", catchup=3600))
    recorded = {MINUTE - timedelta(minutes=5 * back) for back in range(12)}
    plan = plan_catch_up(descriptor, MINUTE, recorded)
    assert (plan.missed, plan.run, plan.skipped) == (0, (), ())


def test_a_long_window_of_a_short_period_walks_a_bounded_number_of_instants() -> None:
    descriptor = validate_descriptor(_task(fixed_rate=1.0, catchup=86_400, catchup_limit=10))
    plan = plan_catch_up(descriptor, MINUTE, set())
    assert (len(plan.run), len(plan.skipped)) == (10, MAX_SKIPS_RECORDED)
    assert plan.at_least
    assert "of more than 10010 missed fires" in plan.skip_reason
    assert plan.run[-1] == MINUTE


# -- the fire path -----------------------------------------------------------------------


def _runner(history: MemoryRunHistory, now: datetime) -> FireRunner:
    return FireRunner(InMemoryLock(), history=history, clock=lambda: now, grace=30.0, node="n1")


def test_a_catch_up_fire_runs_beyond_grace_within_its_window_and_is_recorded_caught_up() -> None:
    descriptor = validate_descriptor(_task(fixed_rate=60.0, catchup=3600))
    history = MemoryRunHistory()
    ran: list[datetime] = []
    instant = MINUTE - timedelta(minutes=30)
    runner = _runner(history, MINUTE)
    scheduled_fire = runner.run(Fire.at(descriptor, instant), lambda: ran.append(instant))
    assert scheduled_fire.verdict is Verdict.TOO_LATE  # grace still holds for a live fire
    caught_up = runner.run(
        Fire.at(descriptor, instant, TriggerKind.CATCH_UP), lambda: ran.append(instant)
    )
    assert caught_up.verdict is Verdict.SUCCEEDED
    assert ran == [instant]
    [record] = history.runs(TARGET, lock=TARGET)
    assert record.state is RunState.CAUGHT_UP
    assert record.error is not None
    assert record.error.startswith("caught up: missed while the fleet was down; ran 1800.000s late")
    assert history.last_success(TARGET, lock=TARGET) == record


def test_a_catch_up_fire_beyond_its_window_or_without_one_is_skipped_and_recorded() -> None:
    history = MemoryRunHistory()
    runner = _runner(history, MINUTE)
    windowed = validate_descriptor(_task(fixed_rate=60.0, catchup=600))
    old = MINUTE - timedelta(minutes=20)
    result = runner.run(Fire.at(windowed, old, TriggerKind.CATCH_UP), lambda: None)
    assert result.verdict is Verdict.TOO_LATE
    [record] = history.runs(TARGET, lock=TARGET)
    assert record.error == "1200.000s late, beyond its catchup window of 10m and the grace of 30s"
    none = validate_descriptor(_task(fixed_rate=60.0))
    result = runner.run(Fire.at(none, MINUTE, TriggerKind.CATCH_UP), lambda: None)
    assert result.verdict is Verdict.TOO_LATE
    assert history.runs(TARGET, lock=TARGET)[0].error == NO_CATCHUP_WINDOW


# -- a tick pass ----------------------------------------------------------------------------


@pytest.fixture
def meter() -> Iterator[tuple[OpenTelemetry, InMemoryMetricReader]]:
    tasks.reset()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield OpenTelemetry(meter_provider=provider), reader
    provider.shutdown()


def _counters(reader: InMemoryMetricReader) -> dict[str, float]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: sum(point.value for point in metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name.startswith("firefly.fire.") and metric.name.endswith(("missed", "caught_up"))
    }


def test_a_tick_pass_catches_up_the_fires_before_its_minute_and_counts_them(
    meter: tuple[OpenTelemetry, InMemoryMetricReader],
) -> None:
    descriptor = validate_descriptor(
        ScheduledDescriptor(
            target=f"{MODULE}:ping",
            cron="* * * * *",
            lock_name="ping-catch-up-tick",
            catchup=600,
            catchup_limit=4,
        )
    )
    settings = Settings(lock_provider="memory", history_url="memory://")
    runtime = build_runtime([descriptor], settings, host="tick", node="n1")
    runtime.telemetry = meter[0]
    try:
        report = TickHost([descriptor], runtime, clock=FakeClock(MINUTE), grace_period=5.0).run()
        history = runtime.fire_runner.get().history
        assert history is not None
        records = {
            r.instant: r for r in history.runs(f"{MODULE}:ping", 100, lock="ping-catch-up-tick")
        }
    finally:
        runtime.close()
    missed = [MINUTE - timedelta(minutes=back) for back in range(10, 0, -1)]
    assert sorted(r.fire.instant for r in report.results) == [*missed[-4:], MINUTE]
    assert [records[at].state for at in missed[-4:]] == [RunState.CAUGHT_UP] * 4
    assert [records[at].state for at in missed[:-4]] == [RunState.SKIPPED] * 6
    assert records[missed[0]].error == (
        "skipped: beyond catchup_limit=4 of 10 missed fires "
        "(the fleet was down; the newest ran, late)"
    )
    assert records[MINUTE].state is RunState.SUCCEEDED
    assert _counters(meter[1]) == {"firefly.fire.missed": 10, "firefly.fire.caught_up": 4}


def test_the_library_host_catches_up_when_the_applications_scheduler_starts() -> None:
    from apscheduler.schedulers.background import BackgroundScheduler  # noqa: PLC0415

    from firefly_scheduling import register  # noqa: PLC0415

    tasks.reset()
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:ping", fixed_rate=3600.0, lock_name="ping-lib", catchup=3 * 3600
    )
    history_settings = Settings(lock_provider="memory", history_url="memory://")
    scheduler = BackgroundScheduler(timezone=UTC)
    register(scheduler, descriptors=[descriptor], settings=history_settings)
    assert scheduler.get_job("firefly-scheduling:catch-up") is not None
    scheduler.start()
    try:
        deadline = time.monotonic() + 30
        while len(tasks.calls("ping")) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        scheduler.shutdown()
    assert len(tasks.calls("ping")) == 3  # the three hourly fires of the window


def test_the_asyncio_host_catches_up_as_it_starts() -> None:
    import asyncio  # noqa: PLC0415

    from firefly_scheduling.hosts.asyncio_host import AsyncHost  # noqa: PLC0415
    from firefly_scheduling.hosts.runtime.asyncio_boot import build_async_runtime  # noqa: PLC0415

    tasks.reset()
    descriptor = validate_descriptor(
        ScheduledDescriptor(
            target=f"{MODULE}:ping", fixed_rate=3600.0, lock_name="ping-aio", catchup=2 * 3600
        )
    )
    settings = Settings(lock_provider="memory", history_url="memory://")

    async def scenario() -> None:
        runtime = build_async_runtime([descriptor], settings, host="asyncio")
        host = AsyncHost([descriptor], runtime)
        host.start()
        assert host.catch_up is not None
        [report] = await asyncio.wait_for(host.catch_up, 30)
        assert [result.verdict for result in report.results] == [Verdict.SUCCEEDED] * 2
        assert await host.stop() == []

    asyncio.run(scenario())
    assert len(tasks.calls("ping")) == 2


def test_monitor_counts_a_caught_up_run_as_a_success_and_its_row_says_so() -> None:
    from firefly_scheduling.cli.monitor import health_problems, health_rows  # noqa: PLC0415

    descriptor = validate_descriptor(_task(fixed_rate=60.0, catchup=3600))
    history = MemoryRunHistory()
    failed = MINUTE - timedelta(minutes=3)
    history.start(TARGET, failed, lock=TARGET, node="n1", token=1, at=failed)
    history.finish(
        TARGET, failed, lock=TARGET, token=1, state=RunState.FAILED, error="x", at=failed
    )
    late = MINUTE - timedelta(minutes=1)
    history.start(TARGET, late, lock=TARGET, node="n1", token=2, at=MINUTE)
    history.finish(
        TARGET, late, lock=TARGET, token=2, state=RunState.CAUGHT_UP, error="caught up", at=MINUTE
    )
    problems = health_problems([descriptor], history, MINUTE)
    assert problems == []  # the caught-up run is a later success than the failure
    [row] = health_rows([descriptor], problems, history, MINUTE)
    assert (row["last_success"], row["last_success_state"]) == (late.isoformat(), "caught_up")


def test_a_restarted_job_leaves_the_instants_of_its_catch_up_window_to_catch_up() -> None:
    """The first run of a job records as passed over only the instants older than the
    task's window: the ones inside are catch-up's, and a skip there would hide them."""
    from firefly_scheduling.hosts.apscheduler.jobs import RecurringFire, trigger_for  # noqa: PLC0415

    tasks.reset()
    start = datetime(2026, 3, 4, 12, 0, 0, tzinfo=UTC)
    descriptor = validate_descriptor(
        ScheduledDescriptor(
            target=f"{MODULE}:ping", fixed_rate=1.0, lock_name="ping-window", catchup=2.0
        )
    )
    settings = Settings(lock_provider="memory", history_url="memory://")
    runtime = build_runtime([descriptor], settings, host="run", node="unit")
    now = start
    runtime.now = lambda: now
    try:
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        now = start + timedelta(seconds=5.2)
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        history = runtime.fire_runner.get().history
        assert history is not None
        records = {r.instant: r.state for r in history.runs(descriptor.target, limit=10)}
    finally:
        runtime.close()
    second = timedelta(seconds=1)
    assert records == {
        start: RunState.SUCCEEDED,
        start + second: RunState.SKIPPED,
        start + 2 * second: RunState.SKIPPED,
        start + 3 * second: RunState.SKIPPED,  # 5.2 - 2 = 3.2: older than the window
        start + 5 * second: RunState.SUCCEEDED,
    }


def test_the_oldest_fire_of_a_window_still_runs_when_its_turn_comes_just_past_the_edge() -> None:
    """Found by benchmarks/catchup.py: a fire planned a few milliseconds inside the
    window was skipped as too late once its turn came, a few milliseconds outside."""
    descriptor = validate_descriptor(_task(fixed_rate=60.0, catchup=600))
    history = MemoryRunHistory()
    edge = MINUTE - timedelta(seconds=600, milliseconds=5)  # 600.005 s late at MINUTE
    result = _runner(history, MINUTE).run(
        Fire.at(descriptor, edge, TriggerKind.CATCH_UP), lambda: None
    )
    assert result.verdict is Verdict.SUCCEEDED
    assert history.runs(TARGET, lock=TARGET)[0].state is RunState.CAUGHT_UP
