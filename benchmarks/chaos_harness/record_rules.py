"""Rules 3 and 4 of the fault checker: accounted for, and recorded.

Both compare the runs with the history: every fire of the window ran or has a
reason not to, and every run that ran is recorded with its real outcome (see
`checker` for the rules in full).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from chaos_harness.body_runs import (
    BodyRun,
    CheckReport,
    Restart,
    Violation,
    Window,
    violation_context,
)
from chaos_harness.evidence import Event
from chaos_harness.fault_evidence import (
    claims_won,
    delay_spans,
    failed_history_starts,
    first_claim_written_after,
    restart_between,
)
from chaos_harness.history import HistoryKey, HistoryRow, key_of, parse_instant

#: A node killed this close (seconds) to an instant may have held its claim.
KILL_EXPLAINS_SECONDS = (-3.0, 6.0)


def normalise_reason(reason: str | None) -> str:
    """A recorded reason without its numbers and names, so equal causes count together."""
    if not reason:
        return "(no reason recorded)"
    text = re.sub(r"'[^']*'", "<name>", reason)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return text.split(": ", 1)[0] if text.startswith("the lock backend failed") else text


#: The state a run's record must hold, by the verdict its node reported.
_RECORDED_STATES = {"SUCCEEDED": "succeeded", "FAILED": "failed"}


def check_recorded(
    runs: list[BodyRun],
    history: dict[HistoryKey, HistoryRow],
    events: list[Event],
    report: CheckReport,
    restarts: list[Restart],
) -> None:
    """Rule 4: every run that ran is in the history with its real outcome."""
    by_fire: dict[HistoryKey, list[BodyRun]] = defaultdict(list)
    for run in runs:
        if not run.killed:
            by_fire[run.key].append(run)
    failed_starts = failed_history_starts(events)
    claims = claims_won(events)
    delays = delay_spans(events)
    for key, alive in by_fire.items():
        report.recorded_fires += 1
        # From the first claim: a restart after it may have let a second node in.
        written = first_claim_written_after(claims, alive, delays)
        ordered = not restart_between(restarts, written, alive[-1].start)
        record = history.get(key)
        told = {run.pid for run in alive if (run.pid, key) not in failed_starts}
        for problem in _recorded_problems(record, alive, ordered=ordered, told=told):
            at = alive[-1].start
            report.violations.append(
                Violation(
                    "recorded",
                    f"fire {key.target} @ {key.instant.isoformat()}: {problem}",
                    at,
                    violation_context(events, at),
                )
            )


def _recorded_problems(
    record: HistoryRow | None, alive: list[BodyRun], *, ordered: bool, told: set[int]
) -> list[str]:
    """What is wrong with `record`, the history's record of a fire whose runs (their
    nodes alive to report them) are `alive`; nothing when it is right. `told`: the
    pids whose body was told its attempt by the history (its `start` answered)."""
    if record is None:
        return [f"{alive[-1].describe()} ran, and the history has no record of the fire"]
    if record.state == "skipped":
        return [f"{alive[-1].describe()} ran, and the history records the fire as skipped"]
    problems = []
    holder = next(
        (run for run in alive if run.token == record.token and run.node == record.node), None
    )
    if holder is not None:
        expected = _RECORDED_STATES.get(holder.verdict or "")
        if expected is None and holder.verdict is None and holder.returned:
            expected = "succeeded"
        # A fire run late by catch-up (`catchup=`) records its success as `caught_up`.
        state = "succeeded" if record.state == "caught_up" else record.state
        if expected is not None and state != expected:
            problems.append(
                f"{holder.describe()} ended {expected}, and its record says {record.state!r}"
            )
        # A body whose start the history never answered was told the attempt the node
        # guessed; its record counts from what the history held when it ended.
        guessed = holder.pid not in told and record.attempt > holder.attempt
        if record.attempt != holder.attempt and not guessed:
            problems.append(
                f"{holder.describe()} is recorded as attempt {record.attempt}, not {holder.attempt}"
            )
    described = (
        f"the record (node {record.node}, attempt {record.attempt}, token {record.token}, "
        f"{record.state}) is no newer attempt's"
    )
    for run in alive:
        if run is holder and run.fenced:
            problems.append(f"{run.describe()} was reported fenced, and {described}")
        elif run is not holder and ordered and not _newer(record, run):
            if _success_stands(record, run, told):
                continue
            problems.append(f"{run.describe()} ran, and {described}")
    return problems


def _success_stands(record: HistoryRow, run: BodyRun, told: set[int]) -> bool:
    """Whether `record`, an older attempt's success, rightly outlives `run`'s end: a
    success is replaced by a success only (it may have committed with the task's
    writes), and `run`, whose start the history never took, did not succeed."""
    return record.state == "succeeded" and run.pid not in told and run.verdict != "SUCCEEDED"


def _newer(record: HistoryRow, run: BodyRun) -> bool:
    """Whether `record` belongs to a newer attempt than `run`: by fencing token where
    both have one, else by attempt."""
    if record.token is not None and run.token is not None:
        return record.token > run.token
    if record.token is not None:
        return True  # a fenced attempt over one without a token: the history's own order
    return record.attempt > run.attempt


def expected_fires(schedules: dict[str, float], window: Window) -> list[HistoryKey]:
    """Every epoch-aligned instant of every task within the window."""
    fires = []
    epoch = datetime(1970, 1, 1, tzinfo=window.start.tzinfo)
    for target, period in schedules.items():
        step = timedelta(seconds=period)
        first = int(-(-(window.start - epoch).total_seconds() // period))
        instant = epoch + first * step
        while instant < window.end:
            fires.append(key_of(target, instant))
            instant += step
    return fires


@dataclass(frozen=True)
class MissExcuses:
    """What explains a fire that did not run (rule 3): its record says why, or a fault
    left it unrecorded (its skip write failed, it reached a node shutting down, a
    node was SIGKILLed around its instant while it may have held its claim)."""

    unrecorded_skips: frozenset[HistoryKey]
    shutting_down: frozenset[HistoryKey]
    kills: tuple[int, ...]

    @classmethod
    def of(cls, events: list[Event]) -> MissExcuses:
        def keys(ev: str, test: Callable[[Event], bool]) -> frozenset[HistoryKey]:
            return frozenset(
                key_of(event["target"], parse_instant(event["instant"]))
                for event in events
                if event["ev"] == ev and test(event)
            )

        return cls(
            keys("history_refused", lambda event: event["write"] == "skip"),
            keys("outcome", lambda event: event["verdict"] == "SHUTTING_DOWN"),
            tuple(int(event["t"]) for event in events if event["ev"] == "kill"),
        )

    def reason(
        self, key: HistoryKey, record: HistoryRow | None, at: int, excused: str | None = None
    ) -> str | None:
        """Why the fire `key` (its instant at monotonic `at`) did not run, as a miss;
        None when nothing explains it. `excused`: a reason the caller knows of."""
        # `buffered`: its node stopped while the fire waited (`fires.overlap_wait`).
        if record is not None and record.state in {"skipped", "expired", "failed", "buffered"}:
            return f"{record.state}: {normalise_reason(record.error)}"
        if key in self.unrecorded_skips:
            return "unrecorded: its skip write failed (history failure)"
        if key in self.shutting_down:
            return "unrecorded: reached a node that was shutting down"
        if excused is not None:
            return excused
        before, after = (int(seconds * 1e9) for seconds in KILL_EXPLAINS_SECONDS)
        if any(at + before <= kill <= at + after for kill in self.kills):
            return "unrecorded: a node was SIGKILLed around its instant"
        return None


def check_accounted(
    runs: list[BodyRun],
    history: dict[HistoryKey, HistoryRow],
    schedules: dict[str, float],
    window: Window,
    events: list[Event],
    report: CheckReport,
    excused: dict[HistoryKey, str] | None = None,
) -> None:
    """Rule 3; `excused`: fires no node could record, with why (a miss, not a violation)."""
    excused = excused or {}
    ran = {run.key for run in runs}
    excuses = MissExcuses.of(events)
    for key in expected_fires(schedules, window):
        report.fires += 1
        if key in ran:
            report.ran += 1
            continue
        record = history.get(key)
        at = window.monotonic(key.instant)
        miss = excuses.reason(key, record, at, excused.get(key))
        if miss is not None:
            report.misses[miss] += 1
            continue
        state = "no record" if record is None else f"a {record.state!r} record and no body run"
        report.violations.append(
            Violation(
                "accounted",
                f"fire {key.target} @ {key.instant.isoformat()} neither ran nor was recorded "
                f"as skipped ({state})",
                at,
                violation_context(events, at),
            )
        )
