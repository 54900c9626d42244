"""The effects setups' rules (effect once, guarded writes in token order), fed violating
states; and rule 4's one allowance for a success that outlives a newer failed run."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_evidence import T0, checked_against, every_fire_ran, mono_at, refused_start, run
from chaos_harness.body_runs import CheckReport
from chaos_harness.effects_rules import (
    EffectsState,
    GuardedWrite,
    check_effect_once,
    check_guarded_writes,
)
from chaos_harness.history import HistoryKey, HistoryRow, key_of

TARGET = "app:effect"
FIRE = key_of(TARGET, T0)
OTHER = key_of(TARGET, T0 + timedelta(seconds=1))


def _record(key: HistoryKey, state: str, token: int = 1) -> HistoryRow:
    return HistoryRow(key, "L", state, 1, "n1", token, None)


def _effect_violations(effects: list[HistoryKey], history: list[HistoryRow]) -> list[str]:
    report = CheckReport()
    records = {row.key: row for row in history}
    check_effect_once(EffectsState(effects=effects), records, {TARGET}, report)
    assert {v.rule for v in report.violations} <= {"effect once"}
    return [v.message for v in report.violations]


def test_one_row_per_succeeded_fire_and_none_otherwise_passes() -> None:
    history = [_record(FIRE, "succeeded"), _record(OTHER, "failed")]
    assert _effect_violations([FIRE], history) == []


def test_a_succeeded_fire_without_its_row_is_a_violation() -> None:
    [message] = _effect_violations([], [_record(FIRE, "succeeded")])
    assert "0 effect row(s) and a 'succeeded' record" in message


def test_a_fire_whose_row_committed_twice_is_a_violation() -> None:
    [message] = _effect_violations([FIRE, FIRE], [_record(FIRE, "succeeded")])
    assert "2 effect row(s)" in message


def test_a_row_of_a_fire_not_recorded_succeeded_is_a_violation() -> None:
    for state in ("failed", "running", "expired", "skipped"):
        [message] = _effect_violations([FIRE], [_record(FIRE, state)])
        assert f"1 effect row(s) and a {state!r} record" in message, state
    [message] = _effect_violations([FIRE], [])
    assert "1 effect row(s) and no record" in message


def _write(token: int, previous: int | None, *, written: bool) -> GuardedWrite:
    return GuardedWrite("L", FIRE, 1, token, previous, written)


def _guarded_violations(writes: list[GuardedWrite], stored: int | None) -> list[str]:
    report = CheckReport()
    check_guarded_writes(EffectsState(writes=writes, guarded={"L": stored}), report)
    assert {v.rule for v in report.violations} <= {"guarded writes"}
    return [v.message for v in report.violations]


def test_writes_in_token_order_and_refusals_of_older_tokens_pass() -> None:
    writes = [
        _write(1, None, written=True),
        _write(1, 1, written=True),  # one holding's two bodies: equal tokens write
        _write(3, 1, written=True),
        _write(2, 3, written=False),
    ]
    assert _guarded_violations(writes, 3) == []


def test_an_older_token_written_over_a_newer_one_is_a_violation() -> None:
    writes = [_write(3, None, written=True), _write(2, 3, written=True)]
    [message] = _guarded_violations(writes, 3)
    assert "token 2, found 3" in message
    assert "wrote over a newer token" in message


def test_a_refusal_of_a_current_token_is_a_violation() -> None:
    for previous in (None, 2, 3):
        writes = [_write(3, previous, written=False)]
        assert any("was refused" in m for m in _guarded_violations(writes, previous)), previous


def test_a_row_not_holding_the_newest_token_that_wrote_it_is_a_violation() -> None:
    [message] = _guarded_violations([_write(4, None, written=True)], 2)
    assert "holds token 2, and the newest token that wrote it is 4" in message
    [message] = _guarded_violations([], 5)
    assert "holds token 5, and the newest token that wrote it is None" in message


def _outcome(pid: int, instant: float, attempt: int, token: int, verdict: str) -> dict[str, Any]:
    return {
        "ev": "outcome",
        "t": mono_at(instant + 0.5),
        "pid": pid,
        "target": "app:a",
        "instant": (T0 + timedelta(seconds=instant)).isoformat(),
        "attempt": attempt,
        "token": token,
        "verdict": verdict,
        "lost": False,
        "fenced": False,
    }


def _success_then_a_failed_adopter(
    *, start_refused: bool, applied: bool | None = False
) -> list[str]:
    """Fire 1 succeeded (attempt 1, token 2); a newer run (token 3) failed after it."""
    fire_1 = key_of("app:a", T0 + timedelta(seconds=1))
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    events += run(1, 1.01, 1.05, pid=1, token=2)
    events += [_outcome(1, 1, 1, 2, "SUCCEEDED")]
    events += run(1, 1.1, 1.2, pid=2, attempt=2, token=3)
    events += [_outcome(2, 1, 2, 3, "FAILED")]
    if start_refused:
        events.append(refused_start(2, 1, 1.1) | {"applied": applied})
    history = {}
    for i in (0, 2):  # the other fires, as every_fire_ran ran them
        key = key_of("app:a", T0 + timedelta(seconds=i))
        history[key] = HistoryRow(key, "L", "succeeded", 1, "n1", i + 1, None)
    history[fire_1] = HistoryRow(fire_1, "L", "succeeded", 1, "n1", 2, None)
    report = checked_against(events, history)
    return [v.message for v in report.violations if v.rule == "recorded"]


def test_an_older_success_stands_over_a_newer_failed_run_the_history_never_saw_start() -> None:
    assert _success_then_a_failed_adopter(start_refused=True) == []
    # The real store's failure (not injected): whether it wrote is unknown, and the
    # run was told no attempt all the same.
    assert _success_then_a_failed_adopter(start_refused=True, applied=None) == []
    [message] = _success_then_a_failed_adopter(start_refused=False)
    assert "is no newer attempt's" in message
