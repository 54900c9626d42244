"""What a host learns about each fire: the runner's verdict, adopted runs, the fire log."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks

from firefly_scheduling import InMemoryLock, ScheduledDescriptor
from firefly_scheduling.cli.demo_report import verdict_of
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history.memory import MemoryRunHistory
from firefly_scheduling.history.port import RunState
from firefly_scheduling.hosts.observation.fire_log import FireLog, read_fire_log
from firefly_scheduling.hosts.runtime.execute import execute_fire
from firefly_scheduling.hosts.runtime.task_runtime import Lazy, TaskRuntime
from firefly_scheduling.initial_delay import InitialDelayGate, MemoryAnchorStore

MODULE = "firefly_host_unit_tasks"


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


def runtime_with(history: MemoryRunHistory, *observers: object) -> TaskRuntime:
    return TaskRuntime(
        lock=Lazy.of(InMemoryLock()),
        gate=Lazy(lambda: InitialDelayGate(MemoryAnchorStore())),
        node="here",
        observers=observers,  # type: ignore[arg-type]
        fire_runner=lambda runtime: FireRunner(
            runtime.lock.get(), history=history, node=runtime.node
        ),
    )


def test_a_fire_that_adopts_a_died_run_reports_both_runs_to_observers_in_order() -> None:
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:ping", fixed_rate=1.0, lock_name="adopt-me", lock_ttl=30.0
    )
    now = datetime.now(UTC).replace(microsecond=0)
    died_at = now - timedelta(seconds=5)
    history = MemoryRunHistory()
    assert (
        history.start(
            descriptor.target, died_at, lock="adopt-me", node="died", token=None, at=died_at
        )
        == 1
    )
    recorder = Recorder()
    result = execute_fire(Fire(descriptor, now), runtime_with(history, recorder))

    assert result.verdict is Verdict.SUCCEEDED
    [adopted] = result.adopted
    assert adopted.adoption
    assert not result.adoption
    assert adopted.fire.instant == died_at
    assert adopted.verdict is Verdict.SUCCEEDED
    assert adopted.attempt == 2
    assert recorder.results == [adopted, result]
    assert len(tasks.calls("ping")) == 2
    # Each result carries the bounds of its own body: the adopted one ran first.
    assert adopted.started_at is not None
    assert adopted.ended_at is not None
    assert result.started_at is not None
    assert adopted.ended_at <= result.started_at
    states = {record.instant: record.state for record in history.runs(descriptor.target)}
    assert states == {died_at: RunState.SUCCEEDED, now: RunState.SUCCEEDED}


def test_a_body_that_cannot_be_imported_is_a_failed_run_that_names_the_error() -> None:
    descriptor = ScheduledDescriptor(target=f"{MODULE}:missing", fixed_rate=1.0)
    result = execute_fire(Fire(descriptor, datetime.now(UTC)), runtime_with(MemoryRunHistory()))
    assert result.verdict is Verdict.FAILED
    assert result.ran
    # The runner called the body, which failed resolving its target: bounds and error.
    assert result.started_at is not None
    assert result.ended_at is not None
    assert "not found" in (result.error or "")


def test_the_fire_log_records_the_verdict(
    tmp_path: Path,
) -> None:
    log = tmp_path / "fires.jsonl"
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:ping", cron="* * * * *", lock_name="logged", lock_ttl=30.0
    )
    instant = datetime.now(UTC).replace(second=0, microsecond=0)
    first = runtime_with(MemoryRunHistory(), FireLog(log))
    second = runtime_with(MemoryRunHistory(), FireLog(log))
    execute_fire(Fire(descriptor, instant), first)
    execute_fire(Fire(descriptor, instant), second)  # the claim is taken: another node's
    records, offset = read_fire_log(log)
    assert offset == log.stat().st_size
    assert [(r.status, r.ran) for r in records] == [
        ("succeeded", True),
        ("claimed_elsewhere", False),
    ]
    assert "outcome" not in log.read_text()  # the coarse field of 0.1.0 is gone
    assert not any(record.adoption for record in records)


def test_the_fire_log_records_how_long_a_claim_took_and_none_without_one(
    tmp_path: Path,
) -> None:
    log = tmp_path / "fires.jsonl"
    locked = ScheduledDescriptor(
        target=f"{MODULE}:ping", cron="* * * * *", lock_name="timed", lock_ttl=30.0
    )
    unlocked = ScheduledDescriptor(target=f"{MODULE}:ping", cron="* * * * *")
    instant = datetime.now(UTC).replace(second=0, microsecond=0)
    runtime = runtime_with(MemoryRunHistory(), FireLog(log))
    won = execute_fire(Fire(locked, instant), runtime)
    lost = execute_fire(Fire(locked, instant), runtime)  # its claim is taken now
    execute_fire(Fire(unlocked, instant), runtime)
    records, _ = read_fire_log(log)
    assert [r.status for r in records] == ["succeeded", "claimed_elsewhere", "succeeded"]
    assert won.claim_seconds is not None
    assert lost.claim_seconds is not None
    assert [r.claim_seconds for r in records] == [won.claim_seconds, lost.claim_seconds, None]
    assert won.claim_seconds > 0
    assert lost.claim_seconds > 0


def test_a_fire_log_line_of_0_1_0_still_reads(tmp_path: Path) -> None:
    log = tmp_path / "old.jsonl"
    old = {
        "target": f"{MODULE}:ping",
        "instant": "2026-06-03T12:00:00.000000+00:00",
        "node": "n1",
        "outcome": "skipped_locked",
        "ran": False,
        "locked": True,
        "started_at": None,
        "ended_at": None,
        "status": "claimed_elsewhere",
        "adoption": False,
    }
    log.write_text(json.dumps(old) + "\n")
    [record], _ = read_fire_log(log)
    assert record.status == "claimed_elsewhere"
    assert verdict_of(record) == "claimed elsewhere"


def test_a_skip_before_the_runner_has_no_runner_verdict() -> None:
    runtime = runtime_with(MemoryRunHistory())
    runtime.stop_accepting()
    descriptor = ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=1.0)
    result = execute_fire(Fire(descriptor, datetime.now(UTC)), runtime)
    assert result.verdict is Verdict.SHUTTING_DOWN
    assert (result.attempt, result.token, result.started_at) == (None, None, None)
    assert result.verdict.value == "shutting down"
