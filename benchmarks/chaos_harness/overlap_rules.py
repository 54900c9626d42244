"""Rules 1 and 2 of the fault checker: exclusion and at most once.

Both judge body runs that overlap, of one lock or of one fire, and excuse only
what the fault evidence explains (see `checker` for the rules in full).
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from chaos_harness.body_runs import BodyRun, CheckReport, Restart, Violation, violation_context
from chaos_harness.evidence import Event
from chaos_harness.fault_evidence import (
    claimed_before,
    claims_won,
    delay_spans,
    failed_history_starts,
    first_claim_written_after,
    late_zombie,
    pause_spans,
    restart_between,
    stopped_then_killed,
)
from chaos_harness.history import HistoryKey

#: The verdicts (`Verdict` names) after which a task with `retries=` runs its fire again.
RETRIED_VERDICTS = frozenset({"FAILED", "TIMED_OUT"})


def check_exclusion(
    runs: list[BodyRun], events: list[Event], report: CheckReport, restarts: list[Restart]
) -> None:
    by_lock: dict[str, list[BodyRun]] = defaultdict(list)
    for run in runs:
        by_lock[run.lock].append(run)
    pauses = pause_spans(events)
    delays = delay_spans(events)
    for lock, group in by_lock.items():
        active: list[BodyRun] = []
        for run in group:  # in order of start
            active = [other for other in active if (other.end or 0) > run.start]
            for earlier in active:
                if overlap_excused(earlier, run, restarts, pauses, delays):
                    report.fenced_overlaps += 1
                    continue
                report.violations.append(
                    Violation(
                        "exclusion",
                        f"lock {lock!r}: {run.describe()} started inside "
                        f"{earlier.describe()}, which was not lost and fenced",
                        run.start,
                        violation_context(events, run.start),
                    )
                )
            active.append(run)


def overlap_excused(
    earlier: BodyRun,
    run: BodyRun,
    restarts: list[Restart],
    pauses: dict[int, list[tuple[int, int]]],
    delays: dict[str, list[tuple[int, int]]],
) -> bool:
    """Whether `run`, started inside `earlier` under one lock, is an overlap the faults
    explain: `earlier` was lost and `run`'s token fences it, or `run` is the late one."""
    # A restart of a server that keeps nothing destroyed the earlier lock, whether or
    # not its node lived to learn it (a kill may come first).
    lost = (
        earlier.lost
        or restart_between(restarts, earlier.start, run.start)
        or stopped_then_killed(earlier, run.start, pauses)
    )
    fenced = (
        lost and earlier.token is not None and run.token is not None and run.token > earlier.token
    )
    # Or the later body is the late one: an older holder's, lost and fenced, started
    # late inside the newer holder's (`late_zombie`).
    return fenced or late_zombie(earlier, run, pauses, delays, same_fire=False)


def check_at_most_once(
    runs: list[BodyRun],
    events: list[Event],
    report: CheckReport,
    restarts: list[Restart],
    retried: frozenset[str] = frozenset(),
    alongside: frozenset[str] = frozenset(),
) -> None:
    """Rule 2; a task of `retried` (its `retries=`) runs a fire again after a failure,
    and a rerun of an `alongside` (`allow_all`) fire is judged by `policy_rules`."""
    by_fire: dict[HistoryKey, list[BodyRun]] = defaultdict(list)
    for run in runs:
        by_fire[run.key].append(run)
    pauses = pause_spans(events)
    delays = delay_spans(events)
    claims = claims_won(events)
    failed_starts = failed_history_starts(events)
    refused_starts = failed_history_starts(events, applied=False)
    for group in by_fire.values():
        for previous, run in itertools.pairwise(group):
            taken_over = previous.killed or previous.lost or previous.fenced or previous.paused
            # A taken-over run whose start the history refused: its attempt was never
            # recorded, so the next adopter counts from the one before and repeats it.
            unlearnt = (previous.pid, previous.key) in refused_starts
            grew = run.attempt > previous.attempt or (unlearnt and run.attempt == previous.attempt)
            if taken_over and grew:
                report.adoptions += 1
                continue
            written = first_claim_written_after(claims, (previous, run), delays)
            if run.target in alongside and restart_between(restarts, written, run.start):
                continue  # `alongside-once` counts it: the restart emptied the claim
            if run.target in retried and previous.verdict in RETRIED_VERDICTS and grew:
                report.retries += 1
                continue
            unrecorded = {(run.pid, run.key), (previous.pid, previous.key)} & failed_starts
            claimed = claimed_before(claims, previous) or group[0].start
            if unrecorded and restart_between(restarts, claimed, run.start):
                # The double fault of rule 2's exception: the server restart emptied the
                # claims, and the history, which would have refused a finished fire,
                # either never learnt of the first run or could not answer the second's
                # start (a failure, or a refusal whose reply was lost).
                # The claim emptied is the last one won before the previous run
                # started (an adoption takes none: seed 120401, memcached: restart,
                # then an adoption, then a node whose claim met the emptied server and
                # whose start the history refused). Without claim stamps, the first
                # run's start bounds it.
                report.double_fault_reruns += 1
                continue
            if late_zombie(previous, run, pauses, delays):
                report.late_zombie_bodies += 1
                continue
            report.violations.append(
                Violation(
                    "at-most-once",
                    f"fire ran twice: {run.describe()} after {previous.describe()}, "
                    "which neither died, nor was marked lost, paused or fenced; or the "
                    "attempt did not grow",
                    run.start,
                    violation_context(events, run.start),
                )
            )
