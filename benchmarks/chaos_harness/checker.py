"""The fire guarantees, checked from evidence the code under test cannot fake.

Inputs: the evidence log (body starts and ends stamped with CLOCK_MONOTONIC by the
bodies themselves, kills and pauses stamped by the harness that sent the signals)
and the run history read with a second client. Four rules:

1. **Exclusion.** No two bodies of one lock name overlap in monotonic time, unless
   the earlier one was marked lost (its end event, or its node's verdict, says so;
   or its node was SIGSTOPped when the later body started and SIGKILLed before it
   could report the verdict) and its late writes were fenced: both carry fencing
   tokens and the later body's is greater, so a resource checking tokens refuses the
   earlier one's writes.
2. **At most once.** Each fire `(target, instant)` has one body run, plus one more
   run per earlier run that died (SIGKILLed before its node reported the run's
   verdict: inside the body, or before its end was recorded), was marked lost, was
   SIGSTOPped (past its lease) before its node reported the verdict, or had its end
   fenced (the history had already given the fire to a newer attempt), each with a greater
   attempt number (an adoption). From the adopter's side a runner stalled between
   its body's end and that record is indistinguishable from one killed inside it.
   The attempt may repeat only where the earlier run's history `start` had been
   refused (not a lost reply: the write failed): the history never learnt of that
   attempt, so the next adopter counts from the one before.
   One exception, a double fault counted apart: a server that keeps nothing on disk
   (memcached; the `restart` fault) restarted between the first run's claim (its
   stamp, `claimed`) and the second run, emptying the fire's claim, and one of the
   two runs had its history `start` fail (the history, which would have refused a
   finished fire, never learnt of the first run, or could not be asked by the
   second, or its answer was lost). Neither defence was there;
   docs/guarantees.md states it. Such a restart also destroyed every lock held at its
   stamp: rule 1 counts that holding lost even when its node was killed before it
   could learn it.
3. **Accounted for.** Every fire of the window ran, or the history records why not
   (skipped with a reason, expired). A fire with no record is a miss explained only
   when its skip write failed, injected or not (the node logged the failure of that
   very write), or a node was SIGKILLed around its instant (the node
   that claimed it died before it could write anything), or it reached a node only
   once that node was shutting down (its observer says so; the stop of the run); any
   other is a violation.

4. **Recorded.** Every run that ran is in the history with its real outcome, and
   `fenced` is reported only where a newer attempt owns the record. For each fire
   that ran, its runs are those whose node reported their verdict or was never
   killed (a run killed before its verdict may leave no record, or a `running` or
   `expired` one: the node took its end with it). The fire's record must exist and
   not be a skip. Where it carries the token (and node) of one of those runs, its
   state must be that run's outcome (the verdict its node reported; without one,
   `succeeded` when the body's end was stamped; an `expired` record too, closed by
   another node while the run, its lock lost, still ran: the history writes the
   run's late end over its own expiry) and its attempt the one the body
   was told (or a greater one, where the history never answered the run's `start`:
   the node guessed it), and no other run may carry a newer token (the newest
   attempt that ran owns the record; one exception: an older attempt's `succeeded`
   record stands over a newer run that did not succeed and whose start the history
   never took, since a success is replaced by a success only). Otherwise it must be
   a newer attempt's than every one of them
   (one that was killed, or never reached its body). A run whose node reported it
   `fenced` needs a record with a newer token than its own. Token order is not
   judged across a restart of a server that keeps nothing (its counters start
   again).

A killed body ends at the kill's stamp (taken after the signal, so overlaps are
judged conservatively); a body with no end and no kill ends when the run ended.

The fire policies add rules of their own (`policy_rules`: one fire waiting at once
under `buffer_one`, each `allow_all` fire once, a retry never overlapping, a caught-up
fire once, a jittered fire never early), and the steering rules (`steering_rules`)
judge an operator's pauses, triggers and backfills. Rule 2 counts a run after a failed one of a
task with `retries=` as its retry (the attempt grew), and rule 3 excuses the fires
of a whole-fleet outage (`fleet_down`) but a catch-up task's.

This module applies the rules; `body_runs` rebuilds the runs, `fault_evidence` reads
the faults, `overlap_rules` holds rules 1 and 2, `record_rules` rules 3 and 4.
"""

from __future__ import annotations

from collections.abc import Collection

from chaos_harness.body_runs import BodyRun, CheckReport, Violation, Window, body_runs
from chaos_harness.evidence import Event
from chaos_harness.fault_evidence import restart_spans
from chaos_harness.history import HistoryKey, HistoryRow
from chaos_harness.overlap_rules import check_at_most_once, check_exclusion
from chaos_harness.policy_rules import check_policies, fleet_down_misses
from chaos_harness.policy_tasks import PolicyTargets
from chaos_harness.record_rules import (
    check_accounted,
    check_recorded,
    expected_fires,
    normalise_reason,
)
from chaos_harness.steering_nemesis import STEERED
from chaos_harness.steering_rules import check_steering

__all__ = [
    "BodyRun",
    "CheckReport",
    "Violation",
    "Window",
    "body_runs",
    "check",
    "check_accounted",
    "check_at_most_once",
    "check_exclusion",
    "check_recorded",
    "expected_fires",
    "normalise_reason",
]


def check(
    events: list[Event],
    history: dict[HistoryKey, HistoryRow],
    schedules: dict[str, float],
    window: Window,
    ended: int,
    *,
    volatile_server: bool = False,
    policies: PolicyTargets | None = None,
    steering: bool = False,
    pending_backfills: Collection[tuple[str, str]] = (),
) -> CheckReport:
    """Apply the four rules, and the policy rules (`policy_rules`) to the targets of
    `policies`; the report lists every violation with its context.

    `steering`: an operator steered `STEERED` (the steering rules apply), and
    `pending_backfills` are its backfill windows still stored at the end.

    `volatile_server`: the backend keeps nothing across a restart (memcached), so a
    `restart` fault destroyed every lock and claim at its stamp. An `allow_all` task's
    runs overlap by design: rule 1 leaves them to `alongside-once`.
    """
    policies = policies or PolicyTargets()
    report = CheckReport()
    runs = body_runs(events, ended)
    report.body_runs = len(runs)
    restarts = restart_spans(events) if volatile_server else []
    locked = [run for run in runs if run.target not in policies.alongside]
    check_exclusion(locked, events, report, restarts)
    check_at_most_once(runs, events, report, restarts, policies.retried, policies.alongside)
    excused = fleet_down_misses(events, schedules, window, policies)
    check_accounted(runs, history, schedules, window, events, report, excused)
    check_recorded(runs, history, events, report, restarts)
    check_policies(runs, events, report, policies, window, ended, restarts)
    if steering:
        check_steering(
            runs,
            history,
            events,
            window,
            report,
            period=schedules[STEERED],
            ended=ended,
            pending_backfills=pending_backfills,
        )
    return report
