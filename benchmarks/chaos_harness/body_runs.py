"""Body runs rebuilt from the evidence log, and the report the fault rules fill.

The rules (`checker`) judge runs, not raw events: this module turns the log's
start, end, outcome, kill and pause events into one `BodyRun` per body execution,
and holds the types every rule shares (the report, a violation, the checked window).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from chaos_harness.evidence import Event
from chaos_harness.history import HistoryKey, key_of, parse_instant

#: Events printed around a violation, either side.
CONTEXT_EVENTS = 8
#: A server restart's stamps: began (before the kill), ended (its data surely gone),
#: back (the new server answering).
Restart = tuple[int, int, int]


@dataclass
class BodyRun:
    """One body execution, as the body logged it."""

    target: str
    lock: str
    instant: datetime
    attempt: int
    token: int | None
    node: str
    pid: int
    start: int
    end: int | None = None
    lost: bool = False
    killed: bool = False
    fenced: bool = False
    paused: bool = False
    #: The verdict its node reported (`Verdict` name), None without one.
    verdict: str | None = None
    #: Whether the body stamped its end (it returned).
    returned: bool = False

    @property
    def key(self) -> HistoryKey:
        return key_of(self.target, self.instant)

    def describe(self) -> str:
        return (
            f"{self.target} @ {self.instant.isoformat()} attempt {self.attempt} on {self.node} "
            f"(pid {self.pid}, token {self.token}, lost={self.lost}, killed={self.killed}, "
            f"fenced={self.fenced}, paused={self.paused}, t={self.start}..{self.end})"
        )


@dataclass(frozen=True)
class Violation:
    rule: str
    message: str
    at: int
    context: tuple[Event, ...] = ()


@dataclass(frozen=True)
class Window:
    """The fires checked for rule 3: instants in `[start, end)` of the harness's wall clock.

    `wall`/`mono` anchor the two clocks (read together), to place an instant on the
    monotonic axis of the evidence.
    """

    start: datetime
    end: datetime
    wall: datetime
    mono: int

    def monotonic(self, instant: datetime) -> int:
        return self.mono + int((instant - self.wall).total_seconds() * 1e9)


@dataclass
class CheckReport:
    fires: int = 0
    ran: int = 0
    body_runs: int = 0
    adoptions: int = 0
    fenced_overlaps: int = 0
    double_fault_reruns: int = 0
    late_zombie_bodies: int = 0
    #: Fires whose runs rule 4 compared with the history.
    recorded_fires: int = 0
    #: Runs of a failed fire again, by its task's `retries=` (rule 2 allows them).
    retries: int = 0
    #: What the policy rules (`policy_rules`) saw of each policy, by what was counted.
    policy: Counter[str] = field(default_factory=Counter)
    #: What the steering rules (`steering_rules`) saw: commands, runs, skips.
    steering: Counter[str] = field(default_factory=Counter)
    misses: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)


def body_runs(events: list[Event], ended: int) -> list[BodyRun]:
    """Every body run, its end from its end event, its node's kill, or the run's end."""
    runs: dict[tuple[int, str, str, int], BodyRun] = {}
    outcomes_lost: set[tuple[int, str, str, int]] = set()
    outcomes_fenced: set[tuple[int, str, str, int]] = set()
    outcomes: dict[tuple[int, str, str, int], int] = {}
    verdicts: dict[tuple[int, str, str, int], str] = {}
    pauses: dict[int, list[int]] = defaultdict(list)
    kills: dict[int, int] = {}
    for event in events:
        kind = event["ev"]
        if kind in {"start", "end", "outcome", "lost"}:
            key = (int(event["pid"]), event["target"], event["instant"], event["attempt"] or 0)
        if kind == "start":
            runs[key] = BodyRun(
                target=event["target"],
                lock=event["lock"],
                instant=parse_instant(event["instant"]),
                attempt=int(event["attempt"]),
                token=event["token"],
                node=event["node"],
                pid=int(event["pid"]),
                start=int(event["t"]),
            )
        elif kind == "end" and key in runs:
            runs[key].end = int(event["t"])
            runs[key].returned = True
            runs[key].lost = runs[key].lost or bool(event["lost"])
        elif kind == "lost" and key in runs:  # the body saw it mid-run (tasks._work)
            runs[key].lost = True
        elif kind == "outcome":
            outcomes[key] = int(event["t"])
            verdicts[key] = event["verdict"]
            if event["lost"]:
                outcomes_lost.add(key)
            if event["fenced"]:
                outcomes_fenced.add(key)
        elif kind == "kill":
            kills.setdefault(int(event["victim"]), int(event["t"]))
        elif kind == "pause":
            pauses[int(event["victim"])].append(int(event["t"]))
    for key, run in runs.items():
        run.lost = run.lost or key in outcomes_lost
        run.fenced = key in outcomes_fenced
        run.verdict = verdicts.get(key)
        killed_at = kills.get(run.pid)
        # Killed before its node could record the run's end: inside the body, or after
        # it and before the history's `finish` (there is then no verdict either).
        run.killed = killed_at is not None and killed_at >= run.start and key not in outcomes
        if run.end is None:
            run.end = killed_at if run.killed else ended
        # SIGSTOPped (past the lease) before its node reported the run's verdict.
        verdict_at = outcomes.get(key, ended)
        run.paused = any(run.start <= at <= verdict_at for at in pauses.get(run.pid, ()))
    return sorted(runs.values(), key=lambda run: run.start)


def violation_context(events: list[Event], at: int) -> tuple[Event, ...]:
    stamps = [int(event["t"]) for event in events]
    index = next((i for i, stamp in enumerate(stamps) if stamp >= at), len(events))
    return tuple(events[max(0, index - CONTEXT_EVENTS) : index + CONTEXT_EVENTS])
