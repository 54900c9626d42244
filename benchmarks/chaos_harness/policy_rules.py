"""The fire policies' rules of the fault checker, over the evidence log alone.

Each rule judges the tasks of one policy (`policy_tasks.PolicyTargets` says which)
and excuses only what the fault evidence explains:

* **one-waiting** (`buffer_one`): a waiting slot never has two holders at once, so
  never two fires wait at once, fleet-wide. From `slot_stamps`: a slot is held from
  its `slot_taken` stamp to its `slot_given` stamp, or its node's kill; one whose
  lease had lapsed when it was stamped (its node stalled, or the answer came late)
  was not held then, and its fire does not wait in it. An overlap is
  excused when the earlier holding was lost: a renewal failed (`slot_lost`), no grant
  or renewal of it was answered within its TTL before (it lapsed: its holder stalled
  or was killed), its release found it lost or lapsed, its node was SIGSTOPped
  meanwhile, or a server that keeps nothing restarted in between.
* **alongside-once** (`allow_all`): runs of the task overlap, yet each fire's body
  runs once. Such a run is never adopted; only a restart of a server that keeps
  nothing between the earlier of the two runs' claims (`first_claim_written_after`,
  each node's own) and the second run excuses a second: it emptied the fire's claim,
  and the history refuses to start a finished fire only, not a running one.
* **retry-apart** (`retries=`): a retry (an attempt after the first) never runs while
  another run of its task does, excused as exclusion excuses an overlap
  (`overlap_rules.overlap_excused`: the earlier lost and fenced, or a late zombie).
* **caught-up-once** (`catchup=`): of a fire run late by catch-up, at most one body
  returned and stood (was not lost, paused past its lease, or fenced).
* **jitter** (`jitter=`): a jittered fire's body never starts before its instant
  plus its offset (`schedule.jitter`, derived from task and instant), placed on the
  monotonic axis by the harness's own clock, less `CLOCK_OFFSET_SECONDS`: a node's
  clock may be that far ahead (the nemesis's `clock` fault, and each node's offset
  at spawn), and nothing else may make it early.

`fleet_down_misses` says which fires of a `fleet_down` span no node could record
(every task's but a catch-up task's, whose missed fires must run).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

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
    first_claim_written_after,
    pause_spans,
    restart_between,
)
from chaos_harness.fleet_down import BOOT_SECONDS
from chaos_harness.history import HistoryKey, key_of, parse_instant
from chaos_harness.nemesis import CLOCK_OFFSET_SECONDS
from chaos_harness.overlap_rules import overlap_excused
from chaos_harness.policy_tasks import PolicyTargets
from chaos_harness.record_rules import expected_fires
from firefly_scheduling.schedule.jitter import jitter_offset

#: Why a fire of a `fleet_down` span has no record (`fleet_down_misses`).
FLEET_DOWN = "unrecorded: the whole fleet was down at its instant"


def check_policies(
    runs: list[BodyRun],
    events: list[Event],
    report: CheckReport,
    targets: PolicyTargets,
    window: Window,
    ended: int,
    restarts: list[Restart],
) -> None:
    """Apply every policy rule."""
    check_one_waiting(events, report, ended, restarts)
    check_alongside_once(runs, events, report, targets.alongside, restarts)
    check_retries_apart(runs, events, report, targets.retried, restarts)
    check_caught_up_once(runs, events, report, targets.caught_up)
    check_jitter(runs, events, report, dict(targets.jittered), window)


@dataclass
class SlotHeld:
    """One waiting slot held, as `slot_stamps` stamped it."""

    slot: str
    owner: str
    pid: int
    taken: int
    given: int | None = None
    lost: bool = False
    #: The lease's TTL (ns), and the stamps of its grant and of each renewal.
    ttl: int = 0
    confirmed: list[int] = field(default_factory=list)

    def lapsed_by(self, at: int) -> bool:
        """Whether its lease had surely lapsed by `at`: no grant or renewal was answered
        within its TTL before (the server set it before each answer's stamp)."""
        last = max((stamp for stamp in self.confirmed if stamp <= at), default=None)
        return self.ttl > 0 and last is not None and last + self.ttl < at


def slot_holdings(events: list[Event], ended: int) -> list[SlotHeld]:
    """Every waiting slot held, in order of `taken`; one never given ends at its
    node's kill, or at the run's end. A grant whose lease had lapsed by its stamp
    is no holding: the server may have given the slot to another fire before it."""
    held: dict[str, SlotHeld] = {}
    kills: dict[int, int] = {}
    for event in events:
        kind = event["ev"]
        if kind == "slot_taken" and event.get("lapsed"):
            continue
        if kind == "slot_taken":
            owner = str(event["owner"])
            holding = SlotHeld(str(event["slot"]), owner, int(event["pid"]), int(event["t"]))
            holding.ttl = int(float(event.get("ttl", 0.0)) * 1e9)
            holding.confirmed.append(holding.taken)
            held[owner] = holding
        elif kind == "slot_renewed" and str(event["owner"]) in held:
            held[str(event["owner"])].confirmed.append(int(event["t"]))
        elif kind in {"slot_given", "slot_lost"} and str(event["owner"]) in held:
            holding = held[str(event["owner"])]
            holding.lost = holding.lost or kind == "slot_lost" or bool(event.get("lost"))
            if kind == "slot_given":
                holding.given = int(event["t"])
        elif kind == "kill":
            kills.setdefault(int(event["victim"]), int(event["t"]))
    for holding in held.values():
        if holding.given is None:
            killed = kills.get(holding.pid)
            holding.given = killed if killed is not None and killed >= holding.taken else ended
    return sorted(held.values(), key=lambda holding: holding.taken)


def check_one_waiting(
    events: list[Event], report: CheckReport, ended: int, restarts: list[Restart]
) -> None:
    pauses = pause_spans(events)
    by_slot: dict[str, list[SlotHeld]] = defaultdict(list)
    for holding in slot_holdings(events, ended):
        by_slot[holding.slot].append(holding)
    for slot, group in by_slot.items():
        active: list[SlotHeld] = []
        for holding in group:
            report.policy["fires that waited in a slot"] += 1
            active = [other for other in active if (other.given or 0) > holding.taken]
            for earlier in active:
                paused = any(
                    start <= holding.taken and end >= earlier.taken
                    for start, end in pauses.get(earlier.pid, ())
                )
                if (
                    earlier.lost
                    or earlier.lapsed_by(holding.taken)
                    or paused
                    or restart_between(restarts, earlier.taken, holding.taken)
                ):
                    report.policy["slots taken after a lost one"] += 1
                    continue
                report.violations.append(
                    Violation(
                        "one-waiting",
                        f"slot {slot!r}: taken by pid {holding.pid} at t={holding.taken} while "
                        f"pid {earlier.pid} held it (t={earlier.taken}..{earlier.given}), not "
                        "lost: two fires waited at once",
                        holding.taken,
                        violation_context(events, holding.taken),
                    )
                )
            active.append(holding)


def check_alongside_once(
    runs: list[BodyRun],
    events: list[Event],
    report: CheckReport,
    alongside: frozenset[str],
    restarts: list[Restart],
) -> None:
    by_fire: dict[HistoryKey, list[BodyRun]] = defaultdict(list)
    running: dict[str, list[BodyRun]] = defaultdict(list)
    for run in runs:  # in order of start
        if run.target not in alongside:
            continue
        others = [other for other in running[run.target] if (other.end or 0) > run.start]
        if others:
            report.policy["runs alongside another"] += 1
        running[run.target] = [*others, run]
        by_fire[run.key].append(run)
    claims = claims_won(events)
    delays = delay_spans(events)
    for group in by_fire.values():
        first = group[0]
        for again in group[1:]:
            claimed = first_claim_written_after(claims, (first, again), delays)
            if restart_between(restarts, claimed, again.start):
                report.policy["alongside reruns after a restart"] += 1
                continue
            report.violations.append(
                Violation(
                    "alongside-once",
                    f"an allow_all fire ran twice: {again.describe()} after {first.describe()}",
                    again.start,
                    violation_context(events, again.start),
                )
            )


def check_retries_apart(
    runs: list[BodyRun],
    events: list[Event],
    report: CheckReport,
    retried: frozenset[str],
    restarts: list[Restart],
) -> None:
    pauses = pause_spans(events)
    delays = delay_spans(events)
    by_target: dict[str, list[BodyRun]] = defaultdict(list)
    for run in runs:
        if run.target in retried:
            by_target[run.target].append(run)
    for group in by_target.values():
        for retry in (run for run in group if run.attempt > 1):
            report.policy["retries run"] += 1
            if any(other.instant > retry.instant and other.start < retry.start for other in group):
                report.policy["retries run after a later fire"] += 1
            for other in group:
                if other is retry or not _overlap(other, retry):
                    continue
                earlier, later = (other, retry) if other.start <= retry.start else (retry, other)
                if overlap_excused(earlier, later, restarts, pauses, delays):
                    report.policy["retry overlaps excused (lost and fenced)"] += 1
                    continue
                report.violations.append(
                    Violation(
                        "retry-apart",
                        f"retry {retry.describe()} overlapped {other.describe()}",
                        later.start,
                        violation_context(events, later.start),
                    )
                )


def _overlap(one: BodyRun, other: BodyRun) -> bool:
    return one.start < (other.end or 0) and other.start < (one.end or 0)


def check_caught_up_once(
    runs: list[BodyRun], events: list[Event], report: CheckReport, caught_up: frozenset[str]
) -> None:
    late = {
        (int(event["pid"]), key_of(event["target"], parse_instant(event["instant"])))
        for event in events
        if event["ev"] == "start" and event.get("caught_up") and event["target"] in caught_up
    }
    by_fire: dict[HistoryKey, list[BodyRun]] = defaultdict(list)
    for run in runs:
        by_fire[run.key].append(run)
    for key in sorted({key for _pid, key in late}, key=lambda k: (k.target, k.instant)):
        group = by_fire[key]
        report.policy["caught-up runs"] += sum((run.pid, key) in late for run in group)
        stood = [
            run
            for run in group
            if run.returned and not (run.lost or run.paused or run.fenced or run.killed)
        ]
        if len(stood) > 1:
            report.violations.append(
                Violation(
                    "caught-up-once",
                    f"a caught-up fire ran {len(stood)} times: "
                    + "; ".join(run.describe() for run in stood),
                    stood[1].start,
                    violation_context(events, stood[1].start),
                )
            )


def check_jitter(
    runs: list[BodyRun],
    events: list[Event],
    report: CheckReport,
    jittered: dict[str, float],
    window: Window,
) -> None:
    allowance = int(CLOCK_OFFSET_SECONDS * 1e9)
    for run in runs:
        jitter = jittered.get(run.target)
        if jitter is None:
            continue
        report.policy["jittered runs"] += 1
        due = run.instant + jitter_offset(run.target, run.instant, jitter)
        earliest = window.monotonic(due) - allowance
        if run.start >= earliest:
            continue
        early = (window.monotonic(due) - run.start) / 1e9
        report.violations.append(
            Violation(
                "jitter",
                f"{run.describe()} started {early:.3f} s before its instant plus its offset "
                f"(due {due.isoformat()}), more than the {CLOCK_OFFSET_SECONDS:g} s a node's "
                "clock may be ahead",
                run.start,
                violation_context(events, run.start),
            )
        )


def fleet_down_misses(
    events: list[Event],
    schedules: dict[str, float],
    window: Window,
    targets: PolicyTargets,
) -> dict[HistoryKey, str]:
    """The fires no node could record: due while the whole fleet was down (from a
    `fleet_down` stamp to the first boot after its `fleet_up`, plus `BOOT_SECONDS`),
    of every task but the catch-up ones. A jittered fire is due its offset late."""
    spans = _down_spans(events)
    jitters = dict(targets.jittered)
    missed: dict[HistoryKey, str] = {}
    for key in expected_fires(schedules, window):
        if key.target in targets.caught_up:
            continue
        at = window.monotonic(key.instant)
        early = int(jitters.get(key.target, 0.0) * 1e9)
        if any(down - early <= at <= back for down, back in spans):
            missed[key] = FLEET_DOWN
    return missed


def _down_spans(events: list[Event]) -> list[tuple[int, int]]:
    spans = []
    down: int | None = None
    up: int | None = None
    for event in events:
        kind = event["ev"]
        if kind == "fleet_down":
            down, up = int(event["t"]), None
        elif kind == "fleet_up" and down is not None:
            up = int(event["t"])
        elif kind == "boot" and down is not None and up is not None:
            spans.append((down, int(event["t"]) + int(BOOT_SECONDS * 1e9)))
            down = up = None
    if down is not None:  # never came back before the run ended
        spans.append((down, int(events[-1]["t"]) if events else down))
    return spans
