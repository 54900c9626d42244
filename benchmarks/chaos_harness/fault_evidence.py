"""When the harness's faults struck, as the evidence log stamped them.

Pauses, delays, server restarts, claims won and refused history writes: the rules
excuse an overlap or a rerun only where this evidence explains it. The two
documented limits a fault leaves open (a node stopped then killed, a late body
after a newer holder's) are judged here too, so both rules read them the same way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from chaos_harness.body_runs import BodyRun, Restart
from chaos_harness.evidence import Event
from chaos_harness.history import HistoryKey, key_of, parse_instant
from firefly_scheduling.fires.claims import claim_name

#: Every fire claim won, by claim name: its stamp and its node's pid, in order.
ClaimsWon = dict[str, list[tuple[int, int]]]


def claims_won(events: list[Event]) -> ClaimsWon:
    """The stamps of every fire claim won, by claim name, in order (`claim_stamps`)."""
    stamps: ClaimsWon = defaultdict(list)
    for event in events:
        if event["ev"] == "claimed":
            stamps[event["name"]].append((int(event["t"]), int(event["pid"])))
    return stamps


def claimed_before(claims: ClaimsWon, run: BodyRun) -> int | None:
    """The stamp of the claim that guarded `run`: the last claim of its fire its own
    node won before its body started. None: not stamped.

    Another node's claim may be stamped between this node's claim and its body (a
    restart emptied this node's claim, and the other node won it again): it says
    nothing of when this node's claim was written. An adoption takes no claim: its
    claim is the last one any node won before its body (the run's it adopted).
    """
    if not claims:
        return None
    won = claims.get(claim_name(run.target, run.lock, run.instant), ())
    before = [(t, pid) for t, pid in won if t <= run.start]
    own = max((t for t, pid in before if pid == run.pid), default=None)
    return own if own is not None else max((t for t, _ in before), default=None)


def restart_between(restarts: list[Restart], first: int, last: int) -> bool:
    """Whether a restart emptied the server between `first` and the body start `last`.

    `first` is the stamp of the first run's claim, or, without one, its body start.
    A restart's span runs from its stamp before the kill to the stamp by which its
    data was surely gone (see `restart_spans`), and its server answered again at `back`.
    The second run's claim needed the emptied server back, after the loss, so the
    loss must come before `last`. The first run's claim was written before `first`:
    on the old server, which the restart emptied, unless the new server was already
    answering by then. So the restart counts when its server came back after `first`
    (seed 120402: killed and reaped 22 ms before the first body, back 85 ms after
    it). One whose server was back before `first` does not (the first claim may have
    been made on the new server).
    """
    return any(ended <= last and back >= first for _began, ended, back in restarts)


def stopped_then_killed(
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


def failed_history_starts(
    events: list[Event], *, applied: bool | None = None
) -> set[tuple[int, HistoryKey]]:
    """The (pid, fire) of every history `start` that failed on its node; `applied=False`:
    only those the history surely never took (not a lost reply of a write it made, nor
    a real failure, logged `applied: null`, whose write may have been made)."""
    return {
        (int(e["pid"]), key_of(e["target"], parse_instant(e["instant"])))
        for e in events
        if e["ev"] == "history_refused"
        and e["write"] == "start"
        and (applied is None or e.get("applied", False) is applied)
    }


def pause_spans(events: list[Event]) -> dict[int, list[tuple[int, int]]]:
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


def late_zombie(
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


def delay_spans(events: list[Event]) -> dict[str, list[tuple[int, int]]]:
    """Each node's spans of delayed traffic (`latency` and `stall` faults), by node name."""
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for event in events:
        if event["ev"] == "fault" and event["kind"] in {"latency", "stall"}:
            began = int(event["t"])
            spans[event["node"]].append((began, began + int(float(event["duration"]) * 1e9)))
    return spans


#: The longest a reply may be held back by its node's proxy: a `stall`'s longest.
DELAYED_REPLY_NS = 2_500_000_000


def claim_written_after(
    claims: ClaimsWon, run: BodyRun, delays: dict[str, list[tuple[int, int]]]
) -> int:
    """A lower bound of when the claim that guarded `run` was written on the server:
    its stamp (or the body's start, unstamped), less the longest delay of a reply
    when the node's proxy was delaying its traffic then (a claim stamped after a
    restart may have been written on the server before it, its answer held back)."""
    claimed = claimed_before(claims, run) or run.start
    if any(began <= claimed <= ended for began, ended in delays.get(run.node, ())):
        return claimed - DELAYED_REPLY_NS
    return claimed


def first_claim_written_after(
    claims: ClaimsWon, runs: Iterable[BodyRun], delays: dict[str, list[tuple[int, int]]]
) -> int:
    """A lower bound of when the first of the claims that guarded `runs`, runs of one
    fire, was written: the earliest `claim_written_after` of any of them.

    Bodies may start in another order than their nodes won the fire's claim (seed
    646721, memcached: a node claimed, the server restarted, a second node won the
    emptied claim and ran first, while the first node's start hung in the history):
    a restart emptied a claim when it came between the earliest claim and a later
    run, whichever body started first.
    """
    return min(claim_written_after(claims, run, delays) for run in runs)


def restart_spans(events: list[Event]) -> list[Restart]:
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
