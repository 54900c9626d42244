"""The chaos checker itself, on synthetic evidence: each rule provably fails when broken.

Overlaps, fires run twice or missed, and adoptions; the faults that explain a rerun
or a late body (`test_chaos_checker_faults`) and the records of runs
(`test_chaos_checker_records`) have files of their own. The evidence is built from
`chaos_evidence`.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_evidence import T0, checked, every_fire_ran, mono_at, refused_start, rules, run
from chaos_harness.checker import normalise_reason
from chaos_harness.history import HistoryRow, key_of


def test_a_clean_log_has_no_violation() -> None:
    report = checked(every_fire_ran())
    assert rules(report) == []
    assert (report.fires, report.ran) == (3, 3)


def test_two_bodies_of_one_lock_overlapping_is_a_violation() -> None:
    # app:b shares lock L and runs inside app:a's fire at 1 s.
    events = every_fire_ran() + run(1, 1.015, 1.03, pid=2, target="app:b", token=9)
    report = checked(events)
    assert rules(report) == ["exclusion"]
    assert "started inside" in report.violations[0].message
    assert report.violations[0].context  # the events around it are printed


def test_an_overlap_after_a_lost_and_fenced_holding_is_allowed() -> None:
    events = [
        e for e in every_fire_ran() if e["instant"] != (T0 + timedelta(seconds=1)).isoformat()
    ]
    events += run(1, 1.0, 1.9, pid=1, token=2, lost=True)  # stalled past its lease
    events += run(1.5, 1.5, 1.6, pid=2, target="app:b", token=7)  # newer token
    report = checked(events)
    assert rules(report) == []
    assert report.fenced_overlaps == 1


def test_a_lost_holding_whose_token_is_not_older_is_not_fenced() -> None:
    events = every_fire_ran() + run(1, 1.015, 1.03, pid=2, target="app:b", token=1)
    events = [e for e in events if not (e["pid"] == 1 and e["instant"].endswith("01+00:00"))]
    events += run(1, 1.0, 1.9, pid=1, token=5, lost=True)
    assert "exclusion" in rules(checked(events))


def test_a_fire_run_twice_is_a_violation() -> None:
    events = every_fire_ran() + run(2, 2.5, 2.6, pid=2, lock="M", token=None)
    report = checked(events)
    assert rules(report) == ["at-most-once"]
    assert "ran twice" in report.violations[0].message


def test_one_adoption_after_the_runner_was_killed_is_allowed() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, None, pid=1, token=3)  # its node is SIGKILLed inside the body
    events.append({"ev": "kill", "t": mono_at(2.05), "pid": 0, "victim": 1, "node": "n1"})
    events += run(2, 3.5, 3.6, pid=2, attempt=2, token=4)
    report = checked(events)
    assert rules(report) == []
    assert report.adoptions == 1


def test_an_adoption_that_does_not_raise_the_attempt_is_a_violation() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, None, pid=1, token=3)
    events.append({"ev": "kill", "t": mono_at(2.05), "pid": 0, "victim": 1, "node": "n1"})
    events += run(2, 3.5, 3.6, pid=2, attempt=1, token=4)
    assert rules(checked(events)) == ["at-most-once"]


def test_a_fire_neither_run_nor_recorded_is_a_violation() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    report = checked(events)
    assert rules(report) == ["accounted"]
    assert "neither ran nor was recorded" in report.violations[0].message


def test_a_fire_recorded_as_skipped_is_a_miss_with_its_reason() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    key = key_of("app:a", T0 + timedelta(seconds=1))
    history = {
        key: HistoryRow(
            key, None, "skipped", 1, "n1", None, "the previous fire still ran (lock 'L' held)"
        )
    }
    report = checked(events, history)
    assert rules(report) == []
    assert report.misses == {"skipped: the previous fire still ran (lock <name> held)": 1}


def test_a_miss_whose_skip_write_failed_is_explained() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    events.append(
        {
            "ev": "history_refused",
            "t": mono_at(1.1),
            "pid": 1,
            "write": "skip",
            "target": "app:a",
            "instant": str(T0 + timedelta(seconds=1)),
        }
    )
    report = checked(events)
    assert rules(report) == []
    assert sum(report.misses.values()) == 1


def test_reasons_are_grouped_without_their_numbers_and_names() -> None:
    assert normalise_reason("1.234s late, beyond the grace of 60s") == normalise_reason(
        "9.9s late, beyond the grace of 60s"
    )
    assert normalise_reason(None) == "(no reason recorded)"


def test_an_adoption_after_a_runner_stalled_before_recording_its_end_is_allowed() -> None:
    # The body ended, then its node stalled past the lease before writing the end:
    # another node adopted the fire, and the staller's end was refused (fenced).
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, 2.02, pid=1, token=3)
    outcome = {"ev": "outcome", "t": mono_at(5.0), "pid": 1, "target": "app:a"}
    outcome |= {"instant": (T0 + timedelta(seconds=2)).isoformat(), "attempt": 1}
    outcome |= {"verdict": "SUCCEEDED", "lost": False, "fenced": True}
    events.append(outcome)
    events += run(2, 3.5, 3.6, pid=2, attempt=2, token=4)
    report = checked(events)
    assert rules(report) == []
    assert report.adoptions == 1
    # Without the fenced end, the same second run is a double run.
    events.remove(outcome)
    assert rules(checked(events)) == ["at-most-once"]


def test_an_adoption_after_a_runner_killed_before_recording_its_end_is_allowed() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, 2.02, pid=1, token=3)  # the body ended ...
    events.append({"ev": "kill", "t": mono_at(2.021), "pid": 0, "victim": 1, "node": "n1"})
    events += run(2, 3.5, 3.6, pid=2, attempt=2, token=4)  # ... but its end was never written
    report = checked(events)
    assert rules(report) == []
    assert report.adoptions == 1


def test_an_adoption_after_a_runner_paused_before_its_verdict_is_allowed() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, 2.02, pid=1, token=3)
    events.append({"ev": "pause", "t": mono_at(2.03), "pid": 0, "victim": 1, "node": "n1"})
    events += run(2, 3.5, 3.6, pid=2, attempt=2, token=4)
    assert rules(checked(events)) == []


def test_a_repeated_attempt_after_a_killed_adopter_whose_start_was_refused_is_allowed() -> None:
    """Seed 4406 (SQLite): n1 killed in attempt 1; n2 adopted, its start refused (the
    history never learnt of attempt 2), killed; n1 restarted and adopted as attempt 2."""
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, None, pid=1, token=3)
    events.append({"ev": "kill", "t": mono_at(2.05), "pid": 0, "victim": 1, "node": "n1"})
    events.append(refused_start(2, 2, 2.49))
    events += run(2, 2.5, None, pid=2, attempt=2, token=4)
    events.append({"ev": "kill", "t": mono_at(2.6), "pid": 0, "victim": 2, "node": "n2"})
    events += run(2, 3.5, 3.6, pid=3, attempt=2, token=5)
    report = checked(events)
    assert rules(report) == []
    assert report.adoptions == 2
    without_refusal = [e for e in events if e["ev"] != "history_refused"]
    assert rules(checked(without_refusal)) == ["at-most-once"]


def test_a_repeated_attempt_after_a_paused_adopter_whose_start_was_refused_is_allowed() -> None:
    """Seed 4242 (Redis): n1 adopted as attempt 2, its start refused (a `history_start`
    fault), and was paused past its lease; n2 adopted from the record the history had,
    attempt 1's, so as attempt 2 again."""
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, None, pid=1, token=3)
    events.append({"ev": "kill", "t": mono_at(2.05), "pid": 0, "victim": 1, "node": "n1"})
    events.append(refused_start(2, 2, 2.49))
    events += run(2, 2.5, 2.55, pid=2, attempt=2, token=4)  # stopped before its verdict
    events.append({"ev": "pause", "t": mono_at(2.6), "pid": 0, "victim": 2, "node": "n2"})
    events.append({"ev": "resume", "t": mono_at(3.5), "pid": 0, "victim": 2, "node": "n2"})
    events += run(2, 3.55, 3.7, pid=3, attempt=2, token=5)
    report = checked(events)
    assert rules(report) == []
    assert report.adoptions == 2
    written = [e for e in events if e["ev"] != "history_refused"]
    written.append(refused_start(2, 2, 2.49) | {"applied": True})  # only its reply lost
    assert rules(checked(written)) == ["at-most-once"]
