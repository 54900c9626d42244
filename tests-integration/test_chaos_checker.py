"""The chaos checker itself, on synthetic evidence: each rule provably fails when broken.

`benchmarks/chaos.py` is only worth its "0 violations" if its checker reports the
violations it exists for. Each case builds a small evidence log (what the task
bodies and the harness would append) and a history, and asserts the verdict.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from chaos_harness.checker import CheckReport, Window, check, normalise_reason
from chaos_harness.history import HistoryKey, HistoryRow, key_of

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
SECOND = 1_000_000_000
#: One task firing every second, and a second one sharing its lock.
SCHEDULES = {"app:a": 1.0}
WINDOW = Window(start=T0, end=T0 + timedelta(seconds=3), wall=T0, mono=100 * SECOND)


def _at(seconds: float) -> int:
    return WINDOW.mono + int(seconds * SECOND)


def run(
    instant: float,
    start: float,
    end: float | None,
    *,
    pid: int = 1,
    target: str = "app:a",
    lock: str = "L",
    attempt: int = 1,
    token: int | None = 1,
    lost: bool = False,
) -> list[dict[str, Any]]:
    """The start (and end) events of one body run."""
    fields = {
        "pid": pid,
        "node": f"n{pid}",
        "target": target,
        "lock": lock,
        "instant": (T0 + timedelta(seconds=instant)).isoformat(),
        "attempt": attempt,
        "token": token,
    }
    events = [{"ev": "start", "t": _at(start), **fields}]
    if end is not None:
        events.append({"ev": "end", "t": _at(end), "lost": lost, **fields})
    return events


def every_fire_ran() -> list[dict[str, Any]]:
    return [e for i in range(3) for e in run(i, i + 0.01, i + 0.02, token=i + 1)]


def recorded_as_run(events: list[dict[str, Any]]) -> dict[HistoryKey, HistoryRow]:
    """The history a runner leaves for `events`: each fire that ran recorded as its
    newest run (by token, then attempt), succeeded."""
    newest: dict[HistoryKey, dict[str, Any]] = {}
    for event in events:
        if event["ev"] != "start":
            continue
        key = key_of(event["target"], datetime.fromisoformat(event["instant"]))
        order = (event["token"] or 0, event["attempt"])
        if key not in newest or order > (newest[key]["token"] or 0, newest[key]["attempt"]):
            newest[key] = event
    return {
        key: HistoryRow(key, e["lock"], "succeeded", e["attempt"], e["node"], e["token"], None)
        for key, e in newest.items()
    }


def checked(
    events: list[dict[str, Any]],
    history: dict[HistoryKey, HistoryRow] | None = None,
    *,
    volatile_server: bool = False,
) -> CheckReport:
    """`check` of `events`; the history is what the runner would have recorded for
    them (`recorded_as_run`), with `history`'s records in place of its own."""
    events = sorted(events, key=lambda e: int(e["t"]))
    recorded = recorded_as_run(events) | (history or {})
    return check(
        events, recorded, SCHEDULES, WINDOW, ended=_at(60), volatile_server=volatile_server
    )


def rules(report: CheckReport) -> list[str]:
    return [violation.rule for violation in report.violations]


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
    events.append({"ev": "kill", "t": _at(2.05), "pid": 0, "victim": 1, "node": "n1"})
    events += run(2, 3.5, 3.6, pid=2, attempt=2, token=4)
    report = checked(events)
    assert rules(report) == []
    assert report.adoptions == 1


def test_an_adoption_that_does_not_raise_the_attempt_is_a_violation() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, None, pid=1, token=3)
    events.append({"ev": "kill", "t": _at(2.05), "pid": 0, "victim": 1, "node": "n1"})
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
            "t": _at(1.1),
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
    outcome = {"ev": "outcome", "t": _at(5.0), "pid": 1, "target": "app:a"}
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
    events.append({"ev": "kill", "t": _at(2.021), "pid": 0, "victim": 1, "node": "n1"})
    events += run(2, 3.5, 3.6, pid=2, attempt=2, token=4)  # ... but its end was never written
    report = checked(events)
    assert rules(report) == []
    assert report.adoptions == 1


def test_an_adoption_after_a_runner_paused_before_its_verdict_is_allowed() -> None:
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, 2.02, pid=1, token=3)
    events.append({"ev": "pause", "t": _at(2.03), "pid": 0, "victim": 1, "node": "n1"})
    events += run(2, 3.5, 3.6, pid=2, attempt=2, token=4)
    assert rules(checked(events)) == []


def _refused_start(pid: int, instant: float, at: float) -> dict[str, Any]:
    return {
        "ev": "history_refused",
        "t": _at(at),
        "pid": pid,
        "write": "start",
        "target": "app:a",
        "instant": str(T0 + timedelta(seconds=instant)),
        "injected": True,
    }


def test_a_repeated_attempt_after_a_killed_adopter_whose_start_was_refused_is_allowed() -> None:
    """Seed 4406 (SQLite): n1 killed in attempt 1; n2 adopted, its start refused (the
    history never learnt of attempt 2), killed; n1 restarted and adopted as attempt 2."""
    events = [e for e in every_fire_ran() if not e["instant"].endswith("02+00:00")]
    events += run(2, 2.01, None, pid=1, token=3)
    events.append({"ev": "kill", "t": _at(2.05), "pid": 0, "victim": 1, "node": "n1"})
    events.append(_refused_start(2, 2, 2.49))
    events += run(2, 2.5, None, pid=2, attempt=2, token=4)
    events.append({"ev": "kill", "t": _at(2.6), "pid": 0, "victim": 2, "node": "n2"})
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
    events.append({"ev": "kill", "t": _at(2.05), "pid": 0, "victim": 1, "node": "n1"})
    events.append(_refused_start(2, 2, 2.49))
    events += run(2, 2.5, 2.55, pid=2, attempt=2, token=4)  # stopped before its verdict
    events.append({"ev": "pause", "t": _at(2.6), "pid": 0, "victim": 2, "node": "n2"})
    events.append({"ev": "resume", "t": _at(3.5), "pid": 0, "victim": 2, "node": "n2"})
    events += run(2, 3.55, 3.7, pid=3, attempt=2, token=5)
    report = checked(events)
    assert rules(report) == []
    assert report.adoptions == 2
    written = [e for e in events if e["ev"] != "history_refused"]
    written.append(_refused_start(2, 2, 2.49) | {"applied": True})  # only its reply lost
    assert rules(checked(written)) == ["at-most-once"]


def _restart(
    at: float, *, down_after: float | None = None, back_after: float = 0.05
) -> list[dict[str, Any]]:
    """A restart that took `back_after` seconds (50 ms), as the nemesis stamps it;
    `down_after` seconds after its start, the stamp of the killed server reaped (logs
    before it had none)."""
    events = [
        {"ev": "restarting", "t": _at(at), "pid": 0, "node": "server"},
        {"ev": "fault", "t": _at(at + back_after), "pid": 0, "kind": "restart", "node": "server"},
    ]
    if down_after is not None:
        events.append({"ev": "server_down", "t": _at(at + down_after), "pid": 0, "node": "server"})
    return events


def _rerun_after(
    restart_at: float | None,
    *,
    start_refused: bool,
    refused_pid: int = 2,
    volatile_server: bool = True,
    down_after: float | None = None,
    back_after: float = 0.05,
) -> CheckReport:
    """Fire 2 ran on n1 (its body at 2.01), then again on n2 (attempt 1 both times)."""
    events = every_fire_ran() + run(2, 2.5, 2.6, pid=2, token=9)
    if restart_at is not None:
        events += _restart(restart_at, down_after=down_after, back_after=back_after)
    if start_refused:
        instant = str(T0 + timedelta(seconds=2))
        events.append(
            {
                "ev": "history_refused",
                "t": _at(2.45),
                "pid": refused_pid,
                "write": "start",
                "target": "app:a",
                "instant": instant,
                "injected": True,
            }
        )
    return checked(events, volatile_server=volatile_server)


def test_a_rerun_after_a_server_restart_and_a_refused_start_is_a_double_fault() -> None:
    for refused_pid in (1, 2):  # the history never learnt of the first, or refused the second
        report = _rerun_after(2.3, start_refused=True, refused_pid=refused_pid)
        assert rules(report) == []
        assert report.double_fault_reruns == 1


def test_a_restart_under_way_when_the_first_run_started_emptied_its_claim() -> None:
    """Seed 4406 (memcached): the restart began just before the first body started (its
    claim made on the old server) and ended after it; the second node claimed again."""
    report = _rerun_after(1.99, start_refused=True)  # 1.99 to 2.04, the first run at 2.01
    assert rules(report) == []
    assert report.double_fault_reruns == 1


def test_a_restart_before_an_adoption_still_emptied_the_first_runs_claim() -> None:
    """Seed 120401 (memcached): the first run's node lost its lock, the server
    restarted, another node adopted the fire (an adoption takes no claim), then a third
    node's claim met the emptied server and the history refused its start."""
    events = [
        e for e in every_fire_ran() if e["instant"] != (T0 + timedelta(seconds=2)).isoformat()
    ]
    events += run(2, 2.01, 2.02, pid=1, token=3, lost=True)
    events += _restart(2.1)
    events += run(2, 2.2, 2.25, pid=3, attempt=2, token=4)  # the adoption
    events += run(2, 2.5, 2.6, pid=2, token=9)  # the rerun, its start refused
    events.append(
        {
            "ev": "history_refused",
            "t": _at(2.45),
            "pid": 2,
            "write": "start",
            "target": "app:a",
            "instant": str(T0 + timedelta(seconds=2)),
            "injected": True,
        }
    )
    report = checked(events, volatile_server=True)
    assert rules(report) == []
    assert (report.adoptions, report.double_fault_reruns) == (1, 1)
    persistent = checked(events, volatile_server=False)  # a restart that kept the claims
    assert rules(persistent) == ["at-most-once"]


def test_a_restart_whose_server_came_back_after_the_first_run_started_emptied_its_claim() -> None:
    """Seed 120402 (memcached, second run): the server was killed and reaped 22 ms
    before the first run's body started, and answered again only 85 ms after it. So
    the first run's claim, made before its body, was made on the old server, and the
    restart emptied it; the rerun's claim met the new, empty server."""
    report = _rerun_after(1.95, start_refused=True, down_after=0.03, back_after=0.1)
    assert rules(report) == []
    assert report.double_fault_reruns == 1
    # Back before the first body started: that claim may be the new server's.
    assert rules(_rerun_after(1.95, start_refused=True, down_after=0.03, back_after=0.05)) == [
        "at-most-once"
    ]


def test_a_rerun_needs_both_faults_to_be_explained() -> None:
    assert rules(_rerun_after(2.3, start_refused=False)) == ["at-most-once"]
    assert rules(_rerun_after(None, start_refused=True)) == ["at-most-once"]
    assert rules(_rerun_after(2.7, start_refused=True)) == ["at-most-once"]  # restart after
    assert rules(_rerun_after(2.48, start_refused=True)) == ["at-most-once"]  # back too late
    assert rules(_rerun_after(1.9, start_refused=True)) == ["at-most-once"]  # over before
    persistent = _rerun_after(2.3, start_refused=True, volatile_server=False)
    assert rules(persistent) == ["at-most-once"]  # a restart that kept the claims


def test_a_rerun_whose_claim_came_before_the_server_back_stamp_is_a_double_fault() -> None:
    """Seed 120318 (memcached): the restart began 22 ms before the rerun's body, and the
    nemesis stamped the server back 34 ms after it (its port polled): the data was gone
    by the stamp of the killed server reaped, which the span now ends at."""
    report = _rerun_after(2.48, start_refused=True, down_after=0.005)  # down at 2.485
    assert rules(report) == []
    assert report.double_fault_reruns == 1
    # Reaped only after the rerun's body started: the claim may predate the loss.
    assert rules(_rerun_after(2.48, start_refused=True, down_after=0.03)) == ["at-most-once"]


def test_a_lock_held_across_a_restart_of_a_volatile_server_is_lost() -> None:
    """The restart destroyed the earlier lock; its node was killed before it could know."""
    events = [
        e for e in every_fire_ran() if e["instant"] != (T0 + timedelta(seconds=1)).isoformat()
    ]
    events += run(1, 1.0, None, pid=1, token=2)  # killed inside, never told
    events.append({"ev": "kill", "t": _at(1.9), "pid": 0, "victim": 1, "node": "n1"})
    events += _restart(1.2)
    events += run(1.5, 1.5, 1.6, pid=2, target="app:b", token=7)  # newer token
    report = checked(events, volatile_server=True)
    assert rules(report) == []
    assert report.fenced_overlaps == 1
    assert rules(checked(events, volatile_server=False)) == ["exclusion"]


def _late_zombie_scene(
    *,
    paused: tuple[float, float] | None = (2.05, 2.95),
    fenced: bool = True,
    zombie_token: int = 4,
    delayed: tuple[float, float] | None = None,
) -> CheckReport:
    """Seed 1203 (database on MariaDB): node 2 claimed fire 2, took the lease (token 4)
    and recorded attempt 1, then was stopped before its body's first line; node 3 took
    the lapsed lease (token 5) and ran the fire as attempt 2; node 2 resumed and ran
    its body, told lost, its end fenced."""
    events = [e for i in range(2) for e in run(i, i + 0.01, i + 0.02, token=i + 1)]
    events += run(2, 2.5, 2.6, pid=3, attempt=2, token=5)
    events += run(2, 3.0, 3.1, pid=2, attempt=1, token=zombie_token, lost=True)
    outcome = {"ev": "outcome", "t": _at(3.2), "pid": 2, "target": "app:a"}
    outcome |= {"instant": (T0 + timedelta(seconds=2)).isoformat(), "attempt": 1}
    outcome |= {"verdict": "SUCCEEDED", "lost": True, "fenced": fenced}
    events.append(outcome)
    if paused is not None:
        stop, resume = paused
        events.append({"ev": "pause", "t": _at(stop), "pid": 0, "victim": 2, "node": "n2"})
        events.append({"ev": "resume", "t": _at(resume), "pid": 0, "victim": 2, "node": "n2"})
    if delayed is not None:
        events.append(_latency("n2", *delayed))
    return checked(events)


def _latency(node: str, at: float, duration: float) -> dict[str, Any]:
    """A `latency` fault on `node`'s proxy, as the nemesis stamps it."""
    return {"ev": "fault", "t": _at(at), "pid": 0, "kind": "latency", "node": node} | {
        "duration": duration,
        "detail": "273 ms",
    }


def test_a_delayed_holders_late_body_after_the_adopter_is_counted_apart() -> None:
    """Seed 120403 (MySQL): n2's session was ended by the server 200 ms before its
    pre-body check's reply, delayed 273 ms each way by a latency fault, said it still
    held the lock; n1 adopted the fire meanwhile, then n2's body ran, told lost and
    fenced. A pause and a delayed reply leave the node acting on the same stale answer."""
    report = _late_zombie_scene(paused=None, delayed=(2.2, 1.0))
    assert rules(report) == []
    assert report.late_zombie_bodies == 1
    assert rules(_late_zombie_scene(paused=None, delayed=(2.0, 0.3))) == ["at-most-once"]  # over
    assert rules(_late_zombie_scene(paused=None, delayed=(2.2, 1.0), fenced=False)) == [
        "at-most-once"
    ]


def test_a_late_body_inside_a_newer_holders_body_of_another_fire_is_fenced() -> None:
    """Seed 120403 (MySQL): the same late body started inside the newer holder's body
    of the lock's next fire. Its token is older, it was told lost and fenced, and its
    node's replies were delayed when that body started."""

    def scene(delayed: tuple[float, float] | None) -> CheckReport:
        events = [e for i in range(2) for e in run(i, i + 0.01, i + 0.02, token=i + 1)]
        events += run(2, 2.5, 2.6, pid=3, attempt=2, token=5)  # the adoption
        events += run(2.9, 3.0, 3.5, pid=3, target="app:b", token=6)  # the next holder
        events += run(2, 3.1, 3.2, pid=2, attempt=1, token=4, lost=True)  # the late body
        outcome = {"ev": "outcome", "t": _at(3.3), "pid": 2, "target": "app:a"}
        outcome |= {"instant": (T0 + timedelta(seconds=2)).isoformat(), "attempt": 1}
        outcome |= {"verdict": "SUCCEEDED", "lost": True, "fenced": True}
        events.append(outcome)
        if delayed is not None:
            events.append(_latency("n2", *delayed))
        return checked(events)

    report = scene((2.2, 1.5))
    assert rules(report) == []
    assert (report.late_zombie_bodies, report.fenced_overlaps) == (1, 1)
    assert rules(scene(None)) == ["exclusion", "at-most-once"]


def test_a_holder_killed_after_it_saw_its_lock_lost_is_fenced() -> None:
    """Seed 120403 (MySQL, memcached): the server ended n1's session (or its lease
    lapsed on a loaded node), n2 took the lock with a newer token, and n1 was killed
    mid-body before its end event. The body stamps a `lost` event as soon as it sees
    the loss (`tasks._work`), so the kill no longer hides it."""

    def scene(saw_loss: bool) -> CheckReport:
        events = [
            e for e in every_fire_ran() if e["instant"] != (T0 + timedelta(seconds=1)).isoformat()
        ]
        started = run(1, 1.0, None, pid=1, token=2)
        events += started
        if saw_loss:
            events.append(started[0] | {"ev": "lost", "t": _at(1.4)})
        events.append({"ev": "kill", "t": _at(1.8), "pid": 0, "victim": 1, "node": "n1"})
        events += run(1.5, 1.5, 1.6, pid=2, target="app:b", token=3)
        return checked(events)

    report = scene(saw_loss=True)
    assert rules(report) == []
    assert report.fenced_overlaps == 1
    assert rules(scene(saw_loss=False)) == ["exclusion"]


def test_a_paused_holders_late_body_after_the_adopter_is_counted_apart() -> None:
    report = _late_zombie_scene()
    assert rules(report) == []
    assert (report.late_zombie_bodies, report.adoptions) == (1, 0)


def test_a_late_body_needs_the_pause_the_older_token_and_the_fence_to_be_explained() -> None:
    assert rules(_late_zombie_scene(paused=None)) == ["at-most-once"]
    assert rules(_late_zombie_scene(paused=(2.1, 2.4))) == ["at-most-once"]  # over before
    assert rules(_late_zombie_scene(fenced=False)) == ["at-most-once"]
    # Newer than 5: and its node reported it fenced, which no newer record explains.
    assert rules(_late_zombie_scene(zombie_token=6)) == ["at-most-once", "recorded"]


def _stopped_holder_scene(
    *, killed: bool = True, paused: tuple[float, float] | None = (1.1, 1.9), token: int = 7
) -> CheckReport:
    """Seed 120318 (database on SQLite): n1 was stopped inside its body of fire 1 past
    its lease; n2 took the lapsed lease (a newer token) and ran fire 1.5 of another
    task on the same lock; n1 resumed, ended its body (not yet told lost) and was
    killed before its verdict reached the log."""
    events = [
        e for e in every_fire_ran() if e["instant"] != (T0 + timedelta(seconds=1)).isoformat()
    ]
    events += run(1, 1.0, 1.95, pid=1, token=2)  # its end: lost not known yet
    if paused is not None:
        stop, resume = paused
        events.append({"ev": "pause", "t": _at(stop), "pid": 0, "victim": 1, "node": "n1"})
        events.append({"ev": "resume", "t": _at(resume), "pid": 0, "victim": 1, "node": "n1"})
    if killed:
        events.append({"ev": "kill", "t": _at(2.5), "pid": 0, "victim": 1, "node": "n1"})
    events += run(1.5, 1.5, 1.6, pid=2, target="app:b", token=token)
    return checked(events)


def test_an_overlap_with_a_stopped_holder_killed_before_its_verdict_is_fenced() -> None:
    report = _stopped_holder_scene()
    assert rules(report) == []
    assert report.fenced_overlaps == 1


def test_a_stopped_holder_overlap_needs_the_stop_the_kill_and_a_newer_token() -> None:
    assert rules(_stopped_holder_scene(killed=False)) == ["exclusion"]  # must say lost
    assert rules(_stopped_holder_scene(paused=None)) == ["exclusion"]
    assert rules(_stopped_holder_scene(paused=(1.55, 1.9))) == ["exclusion"]  # after start
    assert rules(_stopped_holder_scene(token=2)) == ["exclusion"]  # not newer


# -- rule 4: every run that ran is recorded, with its real outcome ---------------------

FIRE_1 = key_of("app:a", T0 + timedelta(seconds=1))


def _row(state: str, *, node: str = "n1", attempt: int = 1, token: int | None = 2) -> HistoryRow:
    return HistoryRow(FIRE_1, "L", state, attempt, node, token, None)


def _outcome(pid: int, instant: float, attempt: int, **fields: Any) -> dict[str, Any]:
    event = {"ev": "outcome", "t": _at(instant + 0.5), "pid": pid, "target": "app:a"}
    event |= {"instant": (T0 + timedelta(seconds=instant)).isoformat(), "attempt": attempt}
    return event | {"verdict": "SUCCEEDED", "lost": False, "fenced": False} | fields


def test_a_run_with_no_record_or_a_skip_is_a_violation() -> None:
    """The reported defect: the body ran, its start and its end went unrecorded."""
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    events += run(1, 1.01, 1.02, token=2)
    history = recorded_as_run(events)
    del history[FIRE_1]
    report = check(
        sorted(events, key=lambda e: int(e["t"])), history, SCHEDULES, WINDOW, ended=_at(60)
    )
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
    events.append({"ev": "kill", "t": _at(1.03), "pid": 0, "victim": 1, "node": "n1"})
    history = recorded_as_run(events)
    del history[FIRE_1]
    report = check(
        sorted(events, key=lambda e: int(e["t"])), history, SCHEDULES, WINDOW, ended=_at(60)
    )
    assert rules(report) == []
    assert rules(checked(events, {FIRE_1: _row("running")})) == []


def test_the_newest_attempt_that_ran_owns_the_record() -> None:
    """A killed run adopted: the adopter's run is the record, not the killed one's."""
    events = [e for e in every_fire_ran() if not e["instant"].endswith("01+00:00")]
    events += run(1, 1.01, None, pid=1, token=2)
    events.append({"ev": "kill", "t": _at(1.05), "pid": 0, "victim": 1, "node": "n1"})
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
    events.append({"ev": "pause", "t": _at(1.03), "pid": 0, "victim": 1, "node": "n1"})
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
    events = every_fire_ran() + run(2, 2.5, 2.6, pid=2, token=9) + _restart(2.3)
    events.append(_refused_start(2, 2, 2.45) | {"applied": True})
    rerun = HistoryRow(
        key_of("app:a", T0 + timedelta(seconds=2)), "L", "succeeded", 2, "n2", 9, None
    )
    report = checked(events, {rerun.key: rerun}, volatile_server=True)
    assert rules(report) == []
    assert report.double_fault_reruns == 1


def test_a_run_whose_start_went_unanswered_may_be_recorded_with_a_greater_attempt() -> None:
    """Its body was told the attempt its node guessed (1); the history, which held an
    attempt of the fire by its end, counts on from it."""
    events = [*every_fire_ran(), _refused_start(1, 1, 1.0)]
    assert rules(checked(events, {FIRE_1: _row("succeeded", attempt=2)})) == []
    told = every_fire_ran()  # its start answered: the attempt must be the one it was told
    assert rules(checked(told, {FIRE_1: _row("succeeded", attempt=2)})) == ["recorded"]
