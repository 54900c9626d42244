"""The chaos checker on faults that explain a rerun or a late body, and those that do not.

Server restarts (a volatile server forgets its claims), refused starts, delayed,
paused and stopped holders: each allowance holds only with every fault it names.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_evidence import (
    T0,
    checked,
    every_fire_ran,
    mono_at,
    refused_start,
    rules,
    run,
    server_restart,
)
from chaos_harness.checker import CheckReport
from firefly_scheduling.fires.claims import claim_name


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
        events += server_restart(restart_at, down_after=down_after, back_after=back_after)
    if start_refused:
        instant = str(T0 + timedelta(seconds=2))
        events.append(
            {
                "ev": "history_refused",
                "t": mono_at(2.45),
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
    events += server_restart(2.1)
    events += run(2, 2.2, 2.25, pid=3, attempt=2, token=4)  # the adoption
    events += run(2, 2.5, 2.6, pid=2, token=9)  # the rerun, its start refused
    events.append(
        {
            "ev": "history_refused",
            "t": mono_at(2.45),
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


def _claimed(at: float, *, pid: int = 1, instant: float = 2) -> dict[str, Any]:
    """The stamp of a claim of fire `instant` of `app:a` (lock `L`) won by node `pid`."""
    name = claim_name("app:a", "L", T0 + timedelta(seconds=instant))
    return {"ev": "claimed", "t": mono_at(at), "pid": pid, "name": name}


def test_a_restart_between_the_first_claim_and_its_body_emptied_that_claim() -> None:
    """The first node claimed fire 2, then waited (a hanging history write) while the
    server restarted and answered again, all before its body started: its claim was
    made on the old server, as its stamp proves, and the restart emptied it."""
    events = every_fire_ran() + run(2, 2.5, 2.6, pid=2, token=9)
    events += server_restart(1.9, back_after=0.05)  # back at 1.95, the first body at 2.01
    events += [_claimed(1.85), _claimed(2.46, pid=2)]
    events.append({**refused_start(2, 2, at=2.47), "applied": True})  # a lost reply
    report = checked(events, volatile_server=True)
    assert rules(report) == []
    assert report.double_fault_reruns == 1
    # Claimed once the new server answered: that claim survived, the rerun is a bug.
    events = [e for e in events if e.get("ev") != "claimed"]
    events += [_claimed(1.97), _claimed(2.46, pid=2)]
    assert rules(checked(events, volatile_server=True)) == ["at-most-once"]


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
    events.append({"ev": "kill", "t": mono_at(1.9), "pid": 0, "victim": 1, "node": "n1"})
    events += server_restart(1.2)
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
    outcome = {"ev": "outcome", "t": mono_at(3.2), "pid": 2, "target": "app:a"}
    outcome |= {"instant": (T0 + timedelta(seconds=2)).isoformat(), "attempt": 1}
    outcome |= {"verdict": "SUCCEEDED", "lost": True, "fenced": fenced}
    events.append(outcome)
    if paused is not None:
        stop, resume = paused
        events.append({"ev": "pause", "t": mono_at(stop), "pid": 0, "victim": 2, "node": "n2"})
        events.append({"ev": "resume", "t": mono_at(resume), "pid": 0, "victim": 2, "node": "n2"})
    if delayed is not None:
        events.append(_latency("n2", *delayed))
    return checked(events)


def _latency(node: str, at: float, duration: float) -> dict[str, Any]:
    """A `latency` fault on `node`'s proxy, as the nemesis stamps it."""
    return {"ev": "fault", "t": mono_at(at), "pid": 0, "kind": "latency", "node": node} | {
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
        outcome = {"ev": "outcome", "t": mono_at(3.3), "pid": 2, "target": "app:a"}
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
            events.append(started[0] | {"ev": "lost", "t": mono_at(1.4)})
        events.append({"ev": "kill", "t": mono_at(1.8), "pid": 0, "victim": 1, "node": "n1"})
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
        events.append({"ev": "pause", "t": mono_at(stop), "pid": 0, "victim": 1, "node": "n1"})
        events.append({"ev": "resume", "t": mono_at(resume), "pid": 0, "victim": 1, "node": "n1"})
    if killed:
        events.append({"ev": "kill", "t": mono_at(2.5), "pid": 0, "victim": 1, "node": "n1"})
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
