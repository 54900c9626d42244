"""ResidentHost and execute_fire in-process, on APScheduler, in real (short) time."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from firefly_scheduling.fires.outcome import TriggerKind

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import itertools

import firefly_host_unit_tasks as tasks

from firefly_scheduling import ConfigurationError, InMemoryLock, ScheduledDescriptor, Settings
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.runtime.execute import execute_fire
from firefly_scheduling.hosts.runtime.task_runtime import Lazy, TaskRuntime
from firefly_scheduling.initial_delay import InitialDelayGate, MemoryAnchorStore

MODULE = "firefly_host_unit_tasks"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Recorder:
    def __init__(self) -> None:
        self.results: list[FireResult] = []
        self._mutex = threading.Lock()

    def fire_finished(self, result: FireResult) -> None:
        with self._mutex:
            self.results.append(result)


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    tasks.reset()
    yield
    tasks.reset()


def resident(
    descriptors: list[ScheduledDescriptor], recorder: Recorder, grace: float = 5.0
) -> ResidentHost:
    runtime = build_runtime(
        descriptors,
        Settings(lock_provider="memory"),
        host="run",
        node="unit",
        observers=[recorder],
    )
    return ResidentHost(descriptors, runtime, grace_period=grace)


def test_fixed_rate_fires_on_epoch_aligned_instants() -> None:
    recorder = Recorder()
    host = resident(
        [ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=0.2, lock_name="p", lock_ttl=5.0)],
        recorder,
    )
    host.start()
    time.sleep(1.1)
    assert host.shutdown() == 0
    instants = [result.fire.instant for result in recorder.results]
    assert len(instants) >= 3
    assert len(set(instants)) == len(instants)
    assert all(
        (instant - EPOCH) % timedelta(milliseconds=200) == timedelta(0) for instant in instants
    )
    assert all(result.verdict is Verdict.SUCCEEDED for result in recorder.results)
    assert all(result.verdict is Verdict.SUCCEEDED for result in recorder.results)
    for result in recorder.results:
        assert result.started_at is not None
        assert timedelta(0) <= result.started_at - result.fire.instant < timedelta(seconds=0.5)


def test_shutdown_lets_the_running_body_finish_and_starts_nothing_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "SLOW_SECONDS", 0.6)
    recorder = Recorder()
    host = resident(
        [
            ScheduledDescriptor(
                target=f"{MODULE}:slow", fixed_delay=0.05, lock_name="s", lock_ttl=5.0
            )
        ],
        recorder,
    )
    host.start()
    deadline = time.monotonic() + 5
    while not host.runtime.in_flight() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert host.runtime.in_flight()
    assert host.shutdown() == 0
    assert host.runtime.in_flight() == []
    assert len(tasks.calls("slow")) == 1  # the running body finished; no new one started
    probe = InMemoryLock()
    assert probe.try_acquire("s", 1)  # released by the guard
    probe.release("s")


def test_fixed_delay_waits_from_the_end_of_each_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "SLOW_SECONDS", 0.2)
    host = resident([ScheduledDescriptor(target=f"{MODULE}:slow", fixed_delay=0.3)], Recorder())
    host.start()
    time.sleep(1.4)
    host.shutdown()
    runs = tasks.calls("slow")
    assert len(runs) >= 2
    gaps = [after[1] - before[2] for before, after in itertools.pairwise(runs)]
    assert all(gap >= 0.3 for gap in gaps), gaps


def test_execute_fire_reports_a_lock_that_cannot_be_built_and_skips(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> InMemoryLock:
        raise ConfigurationError("unknown lock provider 'nope'")

    runtime = TaskRuntime(
        lock=Lazy(broken),
        gate=Lazy(lambda: InitialDelayGate(MemoryAnchorStore())),
        node="unit",
    )
    descriptor = ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=1.0)
    result = execute_fire(Fire(descriptor, datetime.now(UTC)), runtime)
    assert result.verdict is Verdict.UNAVAILABLE
    assert tasks.calls("ping") == []
    assert "unknown lock provider 'nope'" in caplog.text


def test_a_failing_observer_does_not_break_the_fire(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def fire_finished(self, result: FireResult) -> None:
            raise RuntimeError("observer bug")

    runtime = build_runtime([], Settings(), host="run", node="unit", observers=[Broken()])
    descriptor = ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=1.0)
    result = execute_fire(Fire(descriptor, datetime.now(UTC)), runtime)
    assert result.verdict is Verdict.SUCCEEDED
    assert "observer" in caplog.text


def test_after_shutdown_began_a_fire_is_not_started() -> None:
    runtime = build_runtime([], Settings(), host="run", node="unit")
    runtime.stop_accepting()
    descriptor = ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=1.0)
    result = execute_fire(Fire(descriptor, datetime.now(UTC)), runtime)
    assert result.verdict is Verdict.SHUTTING_DOWN
    assert result.attempt is None
    assert tasks.calls("ping") == []


def test_a_fire_instant_must_be_aware() -> None:
    descriptor = ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=1.0)
    with pytest.raises(ValueError, match="naive"):
        Fire.at(descriptor, datetime(2026, 1, 1))


def test_a_fire_is_made_in_utc_once_and_never_converted_after() -> None:
    descriptor = ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=1.0)
    paris = datetime(2026, 3, 29, 3, 0, tzinfo=ZoneInfo("Europe/Paris"))
    fire = Fire.at(descriptor, paris)
    assert fire.instant == paris
    assert fire.instant.tzinfo is UTC
    assert fire.trigger is TriggerKind.SCHEDULED
    with pytest.raises(ValueError, match="must be in UTC"):
        Fire(descriptor, paris)


def test_a_fire_later_than_grace_is_too_late_and_says_so() -> None:
    runtime = build_runtime([], Settings(grace=1.0), host="run", node="unit")
    descriptor = ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=1.0, lock_name="late")
    result = execute_fire(Fire(descriptor, datetime.now(UTC) - timedelta(seconds=5)), runtime)
    assert result.verdict is Verdict.TOO_LATE
    assert result.verdict.value == "too late"
    assert tasks.calls("ping") == []


def test_a_stalled_scheduler_runs_the_missed_fires_once_not_as_a_burst() -> None:
    recorder = Recorder()
    rate = 0.1
    host = resident(
        [ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=rate, lock_name="st")], recorder
    )
    host.start()
    time.sleep(0.35)
    host.scheduler.pause()  # the process stalls: about ten fires come and go
    time.sleep(1.0)
    resumed = datetime.now(UTC)
    host.scheduler.resume()
    time.sleep(0.5)
    assert host.shutdown() == 0
    instants = [result.fire.instant for result in recorder.results]
    assert len(set(instants)) == len(instants)  # no fire handled twice
    caught_up = [r for r in recorder.results if resumed <= r.fire.instant + timedelta(seconds=rate)]
    # Once caught up: the latest missed fire (coalesced), then the regular ones,
    # about five in half a second; a burst would have added the ten missed ones.
    assert 3 <= len(caught_up) <= 8, [r.fire.instant for r in caught_up]
    assert all(r.verdict is Verdict.SUCCEEDED for r in recorder.results)


def test_a_stop_request_during_boot_starts_nothing() -> None:
    recorder = Recorder()
    host = resident([ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=0.05)], recorder)
    host.request_stop()
    assert host.run_until_stopped(handle_signals=False) == 0
    assert recorder.results == []
    assert not host.scheduler.running


def test_run_until_stopped_returns_0_once_another_thread_requests_the_stop() -> None:
    recorder = Recorder()
    host = resident([ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=0.05)], recorder)
    threading.Timer(0.4, host.request_stop).start()
    assert host.run_until_stopped(handle_signals=False) == 0
    assert recorder.results
    assert host.runtime.in_flight() == []
