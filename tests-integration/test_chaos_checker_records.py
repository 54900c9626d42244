"""The chaos checker's fourth rule: every run that ran is recorded, with its real outcome."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_evidence import (
    T0,
    checked,
    checked_against,
    every_fire_ran,
    mono_at,
    recorded_as_run,
    refused_start,
    rules,
    run,
    server_restart,
)
from chaos_harness.history import HistoryRow, key_of

FIRE_1 = key_of("app:a", T0 + timedelta(seconds=1))


def _row(state: str, *, node: str = "n1", attempt: int = 1, token: int | None = 2) -> HistoryRow:
    return HistoryRow(FIRE_1, "L", state, attempt, node, token, None)


def _outcome(pid: int, instant: float, attempt: int, **fields: Any) -> dict[str, Any]:
    event = {"ev": "outcome", "t": mono_at(instant + 0.5), "pid": pid, "target": "app:a"}
    event |= {"instant": (T0 + timedelta(seconds=instant)).isoformat(), "attempt": attempt}
    return event | {"verdict": "SUCCEEDED", "lost": False, "fenced": False} | fields


def test_a_run_with_no_record_or_a_skip_is_a_violation() -> None:
    """The reported defect: the body ran, its start and its end went unrecorded."""
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    events += run(1, 1.01, 1.02, token=2)
    history = recorded_as_run(events)
    del history[FIRE_1]
    report = checked_against(events, history)
    assert rules(report) == ["recorded"]
    assert "no record" in report.violations[0].message
    report = checked(events, {FIRE_1: _row("skipped", token=None)})
    assert rules(report) == ["recorded"]
    assert "as skipped" in report.violations[0].message


def test_a_record_that_is_not_the_runs_real_outcome_is_a_violation() -> None:
    events = [*every_fire_ran(), _outcome(1, 1, 1)]
    assert rules(checked(events, {FIRE_1: _row("succeeded")})) == []
    for wrong in ("running", "failed", "expired"):
        report = checked(events, {FIRE_1: _row(wrong)})
        assert rules(report) == ["recorded"], wrong
        assert f"ended succeeded, and its record says {wrong!r}" in report.violations[0].message
    failed = [*every_fire_ran(), _outcome(1, 1, 1, verdict="FAILED")]
    assert rules(checked(failed, {FIRE_1: _row("failed")})) == []
    assert rules(checked(every_fire_ran(), {FIRE_1: _row("succeeded", attempt=2)})) == ["recorded"]


def test_a_run_whose_node_was_killed_before_its_verdict_may_be_unrecorded() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    events += run(1, 1.01, 1.02, token=2)
    events.append({"ev": "kill", "t": mono_at(1.03), "pid": 0, "victim": 1, "node": "n1"})
    history = recorded_as_run(events)
    del history[FIRE_1]
    report = checked_against(events, history)
    assert rules(report) == []
    assert rules(checked(events, {FIRE_1: _row("running")})) == []


def test_the_newest_attempt_that_ran_owns_the_record() -> None:
    """A killed run adopted: the adopter's run is the record, not the killed one's."""
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    events += run(1, 1.01, None, pid=1, token=2)
    events.append({"ev": "kill", "t": mono_at(1.05), "pid": 0, "victim": 1, "node": "n1"})
    events += run(1, 1.5, 1.6, pid=2, attempt=2, token=3)
    assert rules(checked(events)) == []
    report = checked(events, {FIRE_1: _row("running", node="n1", token=2)})
    assert rules(report) == ["recorded"]
    assert "no newer attempt's" in report.violations[0].message


def test_fenced_is_a_violation_unless_a_newer_attempt_owns_the_record() -> None:
    """A stalled run's end refused because the adopter owns the record: fenced, and
    true. Reported fenced while the record is its own, or an older attempt's: false."""
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    events += run(1, 1.01, 1.02, pid=1, token=2)
    events.append({"ev": "pause", "t": mono_at(1.03), "pid": 0, "victim": 1, "node": "n1"})
    events += run(1, 1.5, 1.6, pid=2, attempt=2, token=3)
    events.append(_outcome(1, 1.7, 1, fenced=True) | {"instant": FIRE_1.instant.isoformat()})
    assert rules(checked(events)) == []
    report = checked(events, {FIRE_1: _row("succeeded", node="n1", token=2)})
    assert "recorded" in rules(report)
    assert any("reported fenced" in v.message for v in report.violations)


def test_a_rerun_whose_start_answer_was_lost_after_a_restart_is_a_double_fault() -> None:
    """Seed 731905 (memcached): a restart emptied the fire's claim after n1 ran it, and
    n2's start reached the history, which refused it (finished), but the answer was
    lost: n2 ran the fire unrecorded, and its end then took the record over."""
    events = every_fire_ran() + run(2, 2.5, 2.6, pid=2, token=9) + server_restart(2.3)
    events.append(refused_start(2, 2, 2.45) | {"applied": True})
    rerun = HistoryRow(
        key_of("app:a", T0 + timedelta(seconds=2)), "L", "succeeded", 2, "n2", 9, None
    )
    report = checked(events, {rerun.key: rerun}, volatile_server=True)
    assert rules(report) == []
    assert report.double_fault_reruns == 1


def test_a_run_whose_start_went_unanswered_may_be_recorded_with_a_greater_attempt() -> None:
    """Its body was told the attempt its node guessed (1); the history, which held an
    attempt of the fire by its end, counts on from it."""
    events = [*every_fire_ran(), refused_start(1, 1, 1.0)]
    assert rules(checked(events, {FIRE_1: _row("succeeded", attempt=2)})) == []
    told = every_fire_ran()  # its start answered: the attempt must be the one it was told
    assert rules(checked(told, {FIRE_1: _row("succeeded", attempt=2)})) == ["recorded"]
