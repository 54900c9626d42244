"""The chaos checker's steering rules: a paused fire that started, a trigger or a
backfilled fire that never ran, each reported; what faults or clocks explain, not."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_evidence import T0, WINDOW, mono_at, run
from chaos_harness.body_runs import CheckReport, Window, body_runs
from chaos_harness.history import HistoryKey, HistoryRow, key_of
from chaos_harness.steering_nemesis import STEERED
from chaos_harness.steering_rules import check_steering

PERIOD = 0.5
CHECKED = Window(start=T0, end=T0 + timedelta(seconds=20), wall=WINDOW.wall, mono=WINDOW.mono)
ENDED = mono_at(30)


def _steer(op: str, phase: str, at: float, **fields: Any) -> dict[str, Any]:
    wall = (T0 + timedelta(seconds=at)).timestamp()
    return {"ev": "steer", "t": mono_at(at), "task": STEERED, "op": op, "phase": phase} | {
        "wall": wall,
        **fields,
    }


def _paused_from_2_to_6() -> list[dict[str, Any]]:
    return [
        _steer("pause", "sent", 1.99),
        _steer("pause", "done", 2.0),
        _steer("resume", "sent", 6.0),
        _steer("resume", "done", 6.01, lifted=True),
    ]


def _ran(instant: float, start: float) -> list[dict[str, Any]]:
    return run(instant, start, start + 0.001, target=STEERED, lock="q2")


def _check(
    events: list[dict[str, Any]],
    history: dict[HistoryKey, HistoryRow] | None = None,
    pending: list[tuple[str, str]] | None = None,
) -> CheckReport:
    events = sorted(events, key=lambda event: int(event["t"]))
    report = CheckReport()
    check_steering(
        body_runs(events, ENDED),
        history or {},
        events,
        CHECKED,
        report,
        period=PERIOD,
        ended=ENDED,
        pending_backfills=pending or [],
    )
    return report


def _iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def test_a_fire_of_the_schedule_started_while_paused_is_a_violation() -> None:
    events = _paused_from_2_to_6() + _ran(4.5, 4.51)
    report = _check(events)
    assert [v.rule for v in report.violations] == ["paused"]
    assert _iso(4.5) in report.violations[0].message


def test_a_fire_a_fast_clock_read_before_the_pause_and_a_trigger_run_while_paused() -> None:
    trigger = _iso(3.000123)
    events = _paused_from_2_to_6() + _ran(3.5, 3.51) + _ran(7.0, 7.01)
    events += [_steer("trigger", "done", 3.0, instant=trigger, id="t1")]
    events += run(3.000123, 3.2, 3.21, target=STEERED, lock="q2")
    report = _check(events)
    assert report.violations == []
    assert report.steering["triggers run"] == 1
    assert report.steering["fires run while pausing (read before the pause)"] == 1


def test_a_trigger_that_never_ran_is_a_violation_unless_a_kill_explains_it() -> None:
    asked = [_steer("trigger", "done", 3.0, instant=_iso(3.000123), id="t1")]
    report = _check(asked)
    assert [v.rule for v in report.violations] == ["trigger-once"]
    killed = [*asked, {"ev": "kill", "t": mono_at(3.1), "pid": 1, "victim": 1, "node": "n1"}]
    report = _check(killed)
    assert report.violations == []
    assert sum(report.misses.values()) == 1
    key = key_of(STEERED, T0 + timedelta(seconds=3.000123))
    skipped = {key: HistoryRow(key, "q2", "skipped", 1, "n1", None, "overlap")}
    assert _check(asked, skipped).violations == []


def test_a_backfilled_fire_that_never_ran_is_a_violation_unless_unfinished() -> None:
    window = (_iso(2.0), _iso(4.0))
    asked = _paused_from_2_to_6()
    asked += [_steer("backfill", "done", 8.0, start=window[0], end=window[1])]
    runs = [event for at in (2.0, 2.5, 3.0) for event in _ran(at, 8.1 + at / 10)]
    report = _check(asked + runs)
    assert [v.rule for v in report.violations] == ["backfill-once"]
    assert _iso(3.5) in report.violations[0].message
    assert report.steering["backfilled fires checked"] == 4
    unfinished = _check(asked + runs, pending=[window])
    assert unfinished.violations == []
    assert unfinished.misses["backfill unfinished when the nodes stopped"] == 1
    every = runs + _ran(3.5, 8.5)
    assert _check(asked + every).violations == []
