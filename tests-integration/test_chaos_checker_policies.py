"""The chaos checker's policy rules (`policy_rules`) on synthetic evidence: each one
reports the violation it exists for, and lets the faults it excuses pass.

The evidence is built from `chaos_evidence`, as the checker's other tests build it;
the targets of each policy are the tests' own (`POLICIES`).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos_evidence import T0, WINDOW, mono_at, recorded_as_run, rules, run, server_restart
from chaos_harness.body_runs import CheckReport
from chaos_harness.checker import check
from chaos_harness.history import HistoryKey, HistoryRow, key_of
from chaos_harness.nemesis import CLOCK_OFFSET_SECONDS
from chaos_harness.policy_rules import FLEET_DOWN
from chaos_harness.policy_tasks import PolicyTargets
from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.schedule.jitter import jitter_offset

JITTER = 0.9
POLICIES = PolicyTargets(
    alongside=frozenset({"app:along"}),
    retried=frozenset({"app:retried"}),
    caught_up=frozenset({"app:late"}),
    jittered=(("app:jit", JITTER),),
)
SLOT = "firefly:overlap-waiting:0:B"


def checked(
    events: list[dict[str, Any]],
    schedules: dict[str, float] | None = None,
    history: dict[HistoryKey, HistoryRow] | None = None,
    *,
    volatile_server: bool = False,
) -> CheckReport:
    """`check` with the tests' policies; every fire that ran recorded as it ran."""
    events = sorted(events, key=lambda e: int(e["t"]))
    recorded = recorded_as_run(events) if history is None else history
    return check(
        events,
        recorded,
        schedules or {},
        WINDOW,
        ended=mono_at(60),
        volatile_server=volatile_server,
        policies=POLICIES,
    )


def slot(kind: str, pid: int, at: float, owner: str, **fields: Any) -> dict[str, Any]:
    return {"ev": kind, "t": mono_at(at), "pid": pid, "slot": SLOT, "owner": owner, **fields}


def outcome(pid: int, target: str, instant: float, attempt: int, verdict: str) -> dict[str, Any]:
    return {
        "ev": "outcome",
        "t": mono_at(instant + 0.9),
        "pid": pid,
        "node": f"n{pid}",
        "target": target,
        "instant": (T0 + timedelta(seconds=instant)).isoformat(),
        "attempt": attempt,
        "verdict": verdict,
        "lost": False,
        "fenced": False,
    }


class TestOneFireWaiting:
    def test_two_holders_of_a_waiting_slot_at_once_is_a_violation(self) -> None:
        events = [
            slot("slot_taken", 1, 1.0, "a"),
            slot("slot_taken", 2, 1.5, "b"),
            slot("slot_given", 1, 2.0, "a", lost=False),
            slot("slot_given", 2, 2.5, "b", lost=False),
        ]
        report = checked(events)
        assert rules(report) == ["one-waiting"]
        assert "two fires waited at once" in report.violations[0].message

    def test_a_slot_taken_after_it_was_given_back_is_no_violation(self) -> None:
        events = [
            slot("slot_taken", 1, 1.0, "a"),
            slot("slot_given", 1, 1.4, "a", lost=False),
            slot("slot_taken", 2, 1.5, "b"),
            slot("slot_given", 2, 2.5, "b", lost=False),
        ]
        report = checked(events)
        assert rules(report) == []
        assert report.policy["fires that waited in a slot"] == 2

    def test_a_slot_taken_after_the_holder_lost_it_is_excused(self) -> None:
        events = [
            slot("slot_taken", 1, 1.0, "a"),
            slot("slot_lost", 1, 1.8, "a"),  # its renewal failed: the slot lapsed
            slot("slot_taken", 2, 1.5, "b"),
            slot("slot_given", 1, 2.0, "a", lost=True),
            slot("slot_given", 2, 2.5, "b", lost=False),
        ]
        report = checked(events)
        assert rules(report) == []
        assert report.policy["slots taken after a lost one"] == 1

    def test_a_slot_not_renewed_within_its_ttl_had_lapsed(self) -> None:
        events = [
            slot("slot_taken", 1, 1.0, "a", ttl=0.3),
            slot("slot_renewed", 1, 1.1, "a", ttl=0.3),
            slot("slot_taken", 2, 1.5, "b", ttl=0.3),  # 0.4 s after its last renewal
        ]
        assert rules(checked(events)) == []
        events.append(slot("slot_renewed", 1, 1.4, "a", ttl=0.3))
        assert rules(checked(events)) == ["one-waiting"]

    def test_a_killed_holder_holds_its_slot_until_the_kill(self) -> None:
        events = [
            slot("slot_taken", 1, 1.0, "a"),
            {"ev": "kill", "t": mono_at(1.2), "pid": 0, "victim": 1, "node": "n1"},
            slot("slot_taken", 2, 1.5, "b"),
        ]
        assert rules(checked(events)) == []
        held_on = [slot("slot_taken", 1, 1.0, "a"), slot("slot_taken", 2, 1.5, "b")]
        assert rules(checked(held_on)) == ["one-waiting"]  # never given, never killed

    def test_a_grant_that_lapsed_before_its_stamp_is_no_holding(self) -> None:
        """Seed 646721 (MariaDB): n2 stamped its grant inside n1's holding, whose
        renewals all succeeded. A lease table grants that only when n2's grant came
        first and its stamp late: n2's node stalled (or the answer was held back) past
        the TTL, and n1 took the lapsed slot meanwhile. A lease lapsed by its own
        node's clock at the stamp was not held then: its fire gives it back."""
        events = [
            slot("slot_taken", 1, 1.0, "a", ttl=1.0),
            slot("slot_renewed", 1, 1.3, "a", ttl=1.0),
            slot("slot_taken", 2, 1.5, "b", ttl=1.0, lapsed=True),
            slot("slot_given", 2, 1.51, "b", lost=True),
            slot("slot_renewed", 1, 1.6, "a", ttl=1.0),
            slot("slot_given", 1, 2.0, "a", lost=False),
        ]
        report = checked(events)
        assert rules(report) == []
        assert report.policy["fires that waited in a slot"] == 1
        events[2] = slot("slot_taken", 2, 1.5, "b", ttl=1.0, lapsed=False)
        assert rules(checked(events)) == ["one-waiting"]


def _claimed(at: float, *, pid: int) -> dict[str, Any]:
    """The stamp of the claim of `app:along`'s fire at T0 (lock `A`) won by node `pid`."""
    return {"ev": "claimed", "t": mono_at(at), "pid": pid, "name": claim_name("app:along", "A", T0)}


class TestAllowAll:
    def test_runs_alongside_are_no_overlap_violation(self) -> None:
        events = run(0, 0.0, 1.5, pid=1, target="app:along", lock="A", token=None)
        events += run(1, 1.0, 1.8, pid=2, target="app:along", lock="A", token=None)
        report = checked(events)
        assert rules(report) == []
        assert report.policy["runs alongside another"] == 1

    def test_a_fire_run_twice_is_a_violation(self) -> None:
        events = run(0, 0.0, 0.5, pid=1, target="app:along", lock="A", token=None)
        events += run(0, 1.0, 1.2, pid=2, target="app:along", lock="A", token=None)
        assert "alongside-once" in rules(checked(events))

    def test_a_rerun_after_a_restart_of_a_server_that_keeps_nothing_is_counted(
        self,
    ) -> None:
        events = run(0, 0.0, 1.5, pid=1, target="app:along", lock="A", token=None)
        events += server_restart(0.5, down_after=0.1)
        events += run(0, 1.0, 1.2, pid=2, target="app:along", lock="A", token=None, attempt=2)
        report = checked(events, volatile_server=True)
        assert rules(report) == []
        assert report.policy["alongside reruns after a restart"] == 1

    def test_a_claim_answered_late_after_a_restart_may_predate_it(self) -> None:
        """The claim's answer came after the restart through a delaying proxy: it may
        have been written before it, on the server that lost it."""
        claim = {"ev": "claimed", "t": mono_at(0.7), "pid": 1, "name": "x"}
        events = [*server_restart(0.5, down_after=0.1), claim]
        events += run(0, 0.8, 1.5, pid=1, target="app:along", lock="A", token=None)
        events += run(0, 1.0, 1.2, pid=2, target="app:along", lock="A", token=None)
        claim["name"] = claim_name("app:along", "A", T0)
        assert "alongside-once" in rules(checked(events, volatile_server=True))
        latency = {"ev": "fault", "t": mono_at(0.0), "pid": 0, "kind": "latency"}
        events.append({**latency, "node": "n1", "duration": 2.0})
        assert rules(checked(events, volatile_server=True)) == []

    def test_a_rerun_is_judged_from_the_earliest_claim_whichever_body_started_first(
        self,
    ) -> None:
        """Seed 646721 (memcached): n2 claimed the fire, the server restarted, n1 won
        the emptied claim on the new server and ran at once; n2's body came later, its
        history start hanging. The restart came after the earlier claim, n2's."""
        events = [_claimed(0.1, pid=2), *server_restart(0.2, down_after=0.05)]
        events += [_claimed(0.4, pid=1)]  # after the server answered again, at 0.25
        events += run(0, 0.45, 1.5, pid=1, target="app:along", lock="A", token=None)
        events += run(0, 0.9, 1.8, pid=2, target="app:along", lock="A", token=None)
        report = checked(events, volatile_server=True)
        assert rules(report) == []
        assert report.policy["alongside reruns after a restart"] == 1
        late = [e for e in events if e.get("pid") != 2 or e["ev"] != "claimed"]
        late.append(_claimed(0.3, pid=2))  # n2 too claimed on the new server
        found = rules(checked(late, volatile_server=True))
        assert "alongside-once" in found
        assert "at-most-once" in found

    def test_a_rerun_is_judged_by_the_first_run_s_own_claim_not_a_later_node_s(
        self,
    ) -> None:
        """n3 claimed the fire, the server restarted, n1 won the emptied claim, then
        n3's body started, then n1's: the last claim stamped before n3's body was n1's,
        after the restart; n3's own came before it."""
        events = [_claimed(0.1, pid=3), *server_restart(0.2, down_after=0.05)]
        events += [_claimed(0.5, pid=1)]
        events += run(0, 0.6, 1.8, pid=3, target="app:along", lock="A", token=None)
        events += run(0, 0.8, 1.9, pid=1, target="app:along", lock="A", token=None)
        report = checked(events, volatile_server=True)
        assert rules(report) == []
        assert report.policy["alongside reruns after a restart"] == 1

    def test_the_same_runs_of_a_locked_task_break_exclusion(self) -> None:
        events = run(0, 0.0, 1.5, pid=1, target="app:other", lock="A", token=None)
        events += run(1, 1.0, 1.8, pid=2, target="app:other", lock="A", token=None)
        assert rules(checked(events)) == ["exclusion"]


class TestRetries:
    def test_a_retry_after_the_next_fire_s_run_is_counted_not_reported(self) -> None:
        events = run(0, 0.0, 0.3, pid=1, target="app:retried", lock="R", token=1)
        events.append(outcome(1, "app:retried", 0, 1, "FAILED"))
        events += run(1, 1.0, 1.6, pid=2, target="app:retried", lock="R", token=2)
        events += run(0, 1.7, 1.9, pid=1, target="app:retried", lock="R", token=3, attempt=2)
        report = checked(events)
        assert rules(report) == []
        assert report.retries == 1
        assert report.policy["retries run after a later fire"] == 1

    def test_a_retry_overlapping_another_run_of_its_task_is_a_violation(self) -> None:
        events = run(0, 0.0, 0.3, pid=1, target="app:retried", lock="R", token=1)
        events.append(outcome(1, "app:retried", 0, 1, "FAILED"))
        events += run(1, 1.0, 1.6, pid=2, target="app:retried", lock="R", token=2)
        events += run(0, 1.2, 1.4, pid=1, target="app:retried", lock="R", token=3, attempt=2)
        found = rules(checked(events))
        assert "retry-apart" in found

    def test_a_second_run_after_a_failure_of_a_task_without_retries_is_a_violation(
        self,
    ) -> None:
        events = run(0, 0.0, 0.3, pid=1, target="app:plain", lock="P", token=1)
        events.append(outcome(1, "app:plain", 0, 1, "FAILED"))
        events += run(0, 1.7, 1.9, pid=2, target="app:plain", lock="P", token=3, attempt=2)
        assert "at-most-once" in rules(checked(events))


def caught_up(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "caught_up": True} if e["ev"] == "start" else e for e in events]


class TestCatchUp:
    def test_a_caught_up_fire_run_again_is_a_violation(self) -> None:
        events = run(0, 0.1, 0.2, pid=1, target="app:late", lock="C", token=1)
        events += caught_up(run(0, 2.0, 2.1, pid=2, target="app:late", lock="C", token=2))
        report = checked(events)
        assert "caught-up-once" in rules(report)

    def test_a_caught_up_fire_run_once_is_no_violation(self) -> None:
        events = caught_up(run(0, 2.0, 2.1, pid=2, target="app:late", lock="C", token=2))
        report = checked(events)
        assert rules(report) == []
        assert report.policy["caught-up runs"] == 1

    def test_a_fire_of_a_fleet_outage_is_excused_but_a_catch_up_task_s(self) -> None:
        outage = [
            {"ev": "fleet_down", "t": mono_at(0.5), "pid": 0, "node": "fleet"},
            {"ev": "fleet_up", "t": mono_at(2.5), "pid": 0, "node": "fleet"},
            {"ev": "boot", "t": mono_at(2.8), "pid": 5, "node": "n5", "host": "run"},
        ]
        before = run(0, 0.0, 0.1, target="app:a") + run(0, 0.2, 0.3, target="app:late", lock="C")
        report = checked(before + outage, {"app:a": 1.0})
        assert rules(report) == []
        assert report.misses[FLEET_DOWN] == 2  # the fires at 1 s and 2 s
        assert rules(checked(before + outage, {"app:late": 1.0})) == ["accounted"] * 2


class TestJitter:
    def offset(self) -> float:
        return jitter_offset("app:jit", T0 + timedelta(seconds=1), JITTER).total_seconds()

    def test_a_start_earlier_than_a_node_clock_can_be_ahead_is_a_violation(self) -> None:
        start = 1 + self.offset() - CLOCK_OFFSET_SECONDS - 0.05
        events = run(1, start, start + 0.01, target="app:jit", lock="J")
        report = checked(events)
        assert rules(report) == ["jitter"]
        assert "before its instant plus its offset" in report.violations[0].message

    def test_a_start_as_early_as_a_node_clock_ahead_is_allowed(self) -> None:
        start = 1 + self.offset() - CLOCK_OFFSET_SECONDS + 0.05
        report = checked(run(1, start, start + 0.01, target="app:jit", lock="J"))
        assert rules(report) == []
        assert report.policy["jittered runs"] == 1


def test_a_caught_up_run_recorded_caught_up_is_recorded_with_its_real_outcome() -> None:
    events = caught_up(run(0, 2.0, 2.1, pid=2, target="app:late", lock="C", token=2))
    events.append(outcome(2, "app:late", 0, 1, "SUCCEEDED"))
    history = {
        key: HistoryRow(key, row.lock_name, "caught_up", 1, "n2", 2, None)
        for key, row in recorded_as_run(events).items()
    }
    assert rules(checked(events, history=history)) == []
    history = {key: replace(row, state="failed") for key, row in history.items()}
    assert rules(checked(events, history=history)) == ["recorded"]


def test_a_fire_left_buffered_by_its_stopped_node_is_accounted_for() -> None:
    ran = run(0, 0.0, 0.1, target="app:a") + run(2, 2.0, 2.1, target="app:a")
    history = recorded_as_run(ran)
    key = key_of("app:a", T0 + timedelta(seconds=1))
    history[key] = HistoryRow(key, "L", "buffered", 1, "n2", None, "buffered: it waits")
    report = checked(ran, {"app:a": 1.0}, history)
    assert rules(report) == []
    assert report.misses["buffered: buffered: it waits"] == 1
    del history[key]
    assert rules(checked(ran, {"app:a": 1.0}, history)) == ["accounted"]
