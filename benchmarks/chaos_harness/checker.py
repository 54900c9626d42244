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
   `succeeded` when the body's end was stamped) and its attempt the one the body
   was told (or a greater one, where the history never answered the run's `start`:
   the node guessed it), and no other run may carry a newer token (the newest
   attempt that ran owns the record). Otherwise it must be a newer attempt's than every one of them
   (one that was killed, or never reached its body). A run whose node reported it
   `fenced` needs a record with a newer token than its own. Token order is not
   judged across a restart of a server that keeps nothing (its counters start
   again).

A killed body ends at the kill's stamp (taken after the signal, so overlaps are
judged conservatively); a body with no end and no kill ends when the run ended.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from chaos_harness.evidence import Event
from chaos_harness.history import HistoryKey, HistoryRow, key_of, parse_instant
from firefly_scheduling.fires.claims import claim_name

#: A node killed this close (seconds) to an instant may have held its claim.
KILL_EXPLAINS_SECONDS = (-3.0, 6.0)
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
    misses: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)


def normalise_reason(reason: str | None) -> str:
    """A recorded reason without its numbers and names, so equal causes count together."""
    if not reason:
        return "(no reason recorded)"
    text = re.sub(r"'[^']*'", "<name>", reason)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return text.split(": ", 1)[0] if text.startswith("the lock backend failed") else text


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


def _context(events: list[Event], at: int) -> tuple[Event, ...]:
    stamps = [int(event["t"]) for event in events]
    index = next((i for i, stamp in enumerate(stamps) if stamp >= at), len(events))
    return tuple(events[max(0, index - CONTEXT_EVENTS) : index + CONTEXT_EVENTS])


def check_exclusion(
    runs: list[BodyRun], events: list[Event], report: CheckReport, restarts: list[Restart]
) -> None:
    by_lock: dict[str, list[BodyRun]] = defaultdict(list)
    for run in runs:
        by_lock[run.lock].append(run)
    pauses = _pauses(events)
    delays = _delays(events)
    for lock, group in by_lock.items():
        active: list[BodyRun] = []
        for run in group:  # in order of start
            active = [other for other in active if (other.end or 0) > run.start]
            for earlier in active:
                # A restart of a server that keeps nothing destroyed the earlier lock,
                # whether or not its node lived to learn it (a kill may come first).
                lost = (
                    earlier.lost
                    or _between(restarts, earlier.start, run.start)
                    or _stopped_then_killed(earlier, run.start, pauses)
                )
                fenced = (
                    lost
                    and earlier.token is not None
                    and run.token is not None
                    and run.token > earlier.token
                )
                # Or the later body is the late one: an older holder's, lost and
                # fenced, started late inside the newer holder's (`_late_zombie`).
                late = _late_zombie(earlier, run, pauses, delays, same_fire=False)
                if fenced or late:
                    report.fenced_overlaps += 1
                    continue
                report.violations.append(
                    Violation(
                        "exclusion",
                        f"lock {lock!r}: {run.describe()} started inside "
                        f"{earlier.describe()}, which was not lost and fenced",
                        run.start,
                        _context(events, run.start),
                    )
                )
            active.append(run)


def _claims(events: list[Event]) -> dict[str, list[int]]:
    """The stamps of every fire claim won, by claim name, in order (`claim_stamps`)."""
    stamps: dict[str, list[int]] = defaultdict(list)
    for event in events:
        if event["ev"] == "claimed":
            stamps[event["name"]].append(int(event["t"]))
    return stamps


def _claimed_before(claims: dict[str, list[int]], run: BodyRun) -> int | None:
    """The stamp of the last claim of `run`'s fire won before its body started: the
    claim that guarded it (an adoption's is the run's it adopted). None: not stamped."""
    if not claims:
        return None
    name = claim_name(run.target, run.lock, run.instant)
    return max((t for t in claims.get(name, ()) if t <= run.start), default=None)


def _between(restarts: list[Restart], first: int, last: int) -> bool:
    """Whether a restart emptied the server between `first` and the body start `last`.

    `first` is the stamp of the first run's claim, or, without one, its body start.
    A restart's span runs from its stamp before the kill to the stamp by which its
    data was surely gone (see `_restarts`), and its server answered again at `back`.
    The second run's claim needed the emptied server back, after the loss, so the
    loss must come before `last`. The first run's claim was written before `first`:
    on the old server, which the restart emptied, unless the new server was already
    answering by then. So the restart counts when its server came back after `first`
    (seed 120402: killed and reaped 22 ms before the first body, back 85 ms after
    it). One whose server was back before `first` does not (the first claim may have
    been made on the new server).
    """
    return any(ended <= last and back >= first for _began, ended, back in restarts)


def _stopped_then_killed(
    earlier: BodyRun, at: int, pauses: dict[int, list[tuple[int, int]]]
) -> bool:
    """Whether `earlier`'s node was SIGSTOPped at `at`, and killed before its verdict.

    Seed 120318 (database on SQLite): node n3 was stopped inside a 1 ms body for
    3.5 s, longer than its 1 s lease; n1 took the lapsed lease and ran the lock's next
    fires with newer tokens; n3 resumed, finished its body, logged the lock lapsed and
    its end refused, and was SIGKILLed before its verdict reached the evidence log.
    A stopped node acts on nothing, and a killed one can report nothing: the later
    holder's token is what fences the earlier's writes. Its node not killed, the run
    must say `lost` itself.
    """
    if not earlier.killed:
        return False
    return any(stop <= at <= resume for stop, resume in pauses.get(earlier.pid, ()))


def _failed_starts(
    events: list[Event], *, applied: bool | None = None
) -> set[tuple[int, HistoryKey]]:
    """The (pid, fire) of every history `start` that failed on its node; `applied=False`:
    only those the history never took (not a lost reply of a write it made)."""
    return {
        (int(e["pid"]), key_of(e["target"], parse_instant(e["instant"])))
        for e in events
        if e["ev"] == "history_refused"
        and e["write"] == "start"
        and (applied is None or bool(e.get("applied")) == applied)
    }


def _pauses(events: list[Event]) -> dict[int, list[tuple[int, int]]]:
    """Each node's SIGSTOP..SIGCONT spans, as the harness stamped them, by pid.

    A node killed while stopped stays stopped until the kill.
    """
    stopped: dict[int, int] = {}
    spans: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for event in events:
        if event["ev"] == "pause":
            stopped[int(event["victim"])] = int(event["t"])
        elif event["ev"] in {"resume", "kill"} and int(event["victim"]) in stopped:
            victim = int(event["victim"])
            spans[victim].append((stopped.pop(victim), int(event["t"])))
    return spans


def _late_zombie(
    adopter: BodyRun,
    zombie: BodyRun,
    pauses: dict[int, list[tuple[int, int]]],
    delays: dict[str, list[tuple[int, int]]],
    *,
    same_fire: bool = True,
) -> bool:
    """A holder's body that started after a newer holder's: the documented limit.

    Its node passed the pre-body check, then acted on that answer late: it was
    stopped before the body's first line for longer than the rest of its lease, or
    its proxy delayed the check's reply (a `latency` or `stall` fault; seed 120403,
    MySQL: the server ended the node's session 200 ms before a reply delayed 273 ms
    each way said it still held the lock). Meanwhile another node took the lock,
    freed or lapsed, with a newer token, and started its body; then the late body
    ran, told `lost`, its end fenced (docs/guarantees.md, "A paused node"). No check
    can close that gap; fencing is the defence. Counted apart, and only with all the
    evidence: its node stopped or delayed when the newer body started (a pause
    resumed before its own start), an older token (and, for one fire, an older
    attempt), and `lost` and `fenced` outcomes. `same_fire=False` compares bodies of
    two fires of one lock, whose attempts are unrelated.
    """
    if adopter.token is None or zombie.token is None:
        return False
    older = zombie.token < adopter.token and (not same_fire or zombie.attempt < adopter.attempt)
    stopped_meanwhile = any(
        stop <= adopter.start <= resume <= zombie.start
        for stop, resume in pauses.get(zombie.pid, ())
    )
    delayed_meanwhile = any(
        began <= adopter.start <= until for began, until in delays.get(zombie.node, ())
    )
    return older and zombie.lost and zombie.fenced and (stopped_meanwhile or delayed_meanwhile)


def _delays(events: list[Event]) -> dict[str, list[tuple[int, int]]]:
    """Each node's spans of delayed traffic (`latency` and `stall` faults), by node name."""
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for event in events:
        if event["ev"] == "fault" and event["kind"] in {"latency", "stall"}:
            began = int(event["t"])
            spans[event["node"]].append((began, began + int(float(event["duration"]) * 1e9)))
    return spans


def check_at_most_once(
    runs: list[BodyRun], events: list[Event], report: CheckReport, restarts: list[Restart]
) -> None:
    by_fire: dict[HistoryKey, list[BodyRun]] = defaultdict(list)
    for run in runs:
        by_fire[run.key].append(run)
    pauses = _pauses(events)
    delays = _delays(events)
    claims = _claims(events)
    failed_starts = _failed_starts(events)
    refused_starts = _failed_starts(events, applied=False)
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
            unrecorded = {(run.pid, run.key), (previous.pid, previous.key)} & failed_starts
            claimed = _claimed_before(claims, previous) or group[0].start
            if unrecorded and _between(restarts, claimed, run.start):
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
            if _late_zombie(previous, run, pauses, delays):
                report.late_zombie_bodies += 1
                continue
            report.violations.append(
                Violation(
                    "at-most-once",
                    f"fire ran twice: {run.describe()} after {previous.describe()}, "
                    "which neither died, nor was marked lost, paused or fenced; or the "
                    "attempt did not grow",
                    run.start,
                    _context(events, run.start),
                )
            )


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
    failed_starts = _failed_starts(events)
    for key, alive in by_fire.items():
        report.recorded_fires += 1
        ordered = not _between(restarts, alive[0].start, alive[-1].start)
        record = history.get(key)
        told = {run.pid for run in alive if (run.pid, key) not in failed_starts}
        for problem in _recorded_problems(record, alive, ordered=ordered, told=told):
            at = alive[-1].start
            report.violations.append(
                Violation(
                    "recorded",
                    f"fire {key.target} @ {key.instant.isoformat()}: {problem}",
                    at,
                    _context(events, at),
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
        if expected is not None and record.state != expected:
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
            problems.append(f"{run.describe()} ran, and {described}")
    return problems


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


def check_accounted(
    runs: list[BodyRun],
    history: dict[HistoryKey, HistoryRow],
    schedules: dict[str, float],
    window: Window,
    events: list[Event],
    report: CheckReport,
) -> None:
    ran = {run.key for run in runs}
    refused_skips = {
        key_of(event["target"], parse_instant(event["instant"]))
        for event in events
        if event["ev"] == "history_refused" and event["write"] == "skip"
    }
    shutting_down = {
        key_of(event["target"], parse_instant(event["instant"]))
        for event in events
        if event["ev"] == "outcome" and event["verdict"] == "SHUTTING_DOWN"
    }
    kills = [int(event["t"]) for event in events if event["ev"] == "kill"]
    before, after = (int(seconds * 1e9) for seconds in KILL_EXPLAINS_SECONDS)
    for key in expected_fires(schedules, window):
        report.fires += 1
        if key in ran:
            report.ran += 1
            continue
        record = history.get(key)
        if record is not None and record.state in {"skipped", "expired", "failed"}:
            report.misses[f"{record.state}: {normalise_reason(record.error)}"] += 1
            continue
        if key in refused_skips:
            report.misses["unrecorded: its skip write failed (history failure)"] += 1
            continue
        if key in shutting_down:
            report.misses["unrecorded: reached a node that was shutting down"] += 1
            continue
        at = window.monotonic(key.instant)
        if any(at + before <= kill <= at + after for kill in kills):
            report.misses["unrecorded: a node was SIGKILLed around its instant"] += 1
            continue
        state = "no record" if record is None else f"a {record.state!r} record and no body run"
        report.violations.append(
            Violation(
                "accounted",
                f"fire {key.target} @ {key.instant.isoformat()} neither ran nor was recorded "
                f"as skipped ({state})",
                at,
                _context(events, at),
            )
        )


def _restarts(events: list[Event]) -> list[Restart]:
    """Each server restart: its span, from its `restarting` stamp to the loss of its
    data, and when the new server answered (the `fault` stamp).

    The loss is certain at the `server_down` stamp (the killed server reaped, before
    the new one starts); logs written before that stamp existed end the span at the
    `fault` stamp, taken once the new server accepts connections, which is later.
    """
    spans: list[Restart] = []
    began: int | None = None
    down: int | None = None
    for event in events:
        if event["ev"] == "restarting":
            began, down = int(event["t"]), None
        elif event["ev"] == "server_down":
            down = int(event["t"])
        elif event["ev"] == "fault" and event["kind"] == "restart":
            back = int(event["t"])
            ended = back if down is None else down
            spans.append((ended if began is None else began, ended, back))
            began = down = None
    return spans


def check(
    events: list[Event],
    history: dict[HistoryKey, HistoryRow],
    schedules: dict[str, float],
    window: Window,
    ended: int,
    *,
    volatile_server: bool = False,
) -> CheckReport:
    """Apply the four rules; the report lists every violation with its context.

    `volatile_server`: the backend keeps nothing across a restart (memcached), so a
    `restart` fault destroyed every lock and claim at its stamp.
    """
    report = CheckReport()
    runs = body_runs(events, ended)
    report.body_runs = len(runs)
    restarts = _restarts(events) if volatile_server else []
    check_exclusion(runs, events, report, restarts)
    check_at_most_once(runs, events, report, restarts)
    check_accounted(runs, history, schedules, window, events, report)
    check_recorded(runs, history, events, report, restarts)
    return report
