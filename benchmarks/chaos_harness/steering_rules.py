"""The steering rules: what the nodes did with an operator's pauses, triggers, backfills.

Evidence: the operator's `steer` events (`steer_client`: stamped `sent` before each
call and `done` once it returned, with the operator's real time `wall`), the bodies'
start events, the run history read by a second client, and the backfill requests
still stored once the nodes stopped (a second client of the control store).

1. **Paused.** No body of the steered task starts after a `pause` returned and
   before the next `resume` was sent, for a fire of its schedule whose instant is
   later than the pause's return. A node reads the pauses with its own clock, which
   the nemesis sets up to `CLOCK_OFFSET_SECONDS` off: a fire up to that much later
   may have read them before the pause landed, and runs. A trigger's fire runs
   while paused (the operator asked for it); its instant, the store's time of the
   trigger, is off the schedule's grid, which is how it is told apart.
2. **Each trigger once.** Every trigger that returned, its fire within the checked
   window, ran: a body run of its fire, or the history says why not (skipped with a
   reason, expired, failed). A trigger with neither is a miss only where faults
   explain it, as rule 3 excuses a fire: its skip write failed, or a node was
   SIGKILLed around its instant (the node that took the trigger died with it);
   otherwise a violation. A second run is rule 2's (at most once).
3. **Each backfilled fire once.** Every fire of the schedule in a backfill's window
   (within the checked window) ran by the end: a body run (the one before the pause,
   for a fire that ran then, or the backfill's). Rule 2 already refuses a second
   run of a fire. A fire that did not run is a miss where the request was still
   stored at the end (the backfill had not finished) or the history holds a run of
   it that died before its body started (an expired or running record); otherwise
   a violation: the request is removed only once every fire of it has a run.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta

from chaos_harness.body_runs import BodyRun, CheckReport, Violation, Window, violation_context
from chaos_harness.evidence import Event
from chaos_harness.history import HistoryKey, HistoryRow, key_of, parse_instant
from chaos_harness.nemesis import CLOCK_OFFSET_SECONDS
from chaos_harness.record_rules import MissExcuses
from chaos_harness.steering_nemesis import STEERED

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
#: The states of a record whose run died before its body started.
_DIED = frozenset({"expired", "running"})


def check_steering(
    runs: list[BodyRun],
    history: dict[HistoryKey, HistoryRow],
    events: list[Event],
    window: Window,
    report: CheckReport,
    *,
    period: float,
    ended: int,
    pending_backfills: Collection[tuple[str, str]] = (),
) -> None:
    """Apply the three rules to the steered task, of schedule `period` seconds.

    `pending_backfills`: the windows `(start, end)` (ISO) still stored at the end.
    """
    steers = [e for e in events if e["ev"] == "steer" and e["task"] == STEERED]
    done = [e for e in steers if e["phase"] == "done"]
    report.steering.update(f"{e['op']} {e['phase']}" for e in steers if e["phase"] != "sent")
    report.steering["paused fires skipped"] = sum(
        1
        for row in history.values()
        if row.key.target == STEERED and row.state == "skipped" and row.error == "paused"
    )
    steered = [run for run in runs if run.target == STEERED]
    _check_paused(steered, steers, events, report, period, ended)
    _check_triggers(steered, done, history, events, window, report)
    backfills = [e for e in done if e["op"] == "backfill"]
    _check_backfills(steered, backfills, history, events, window, report, period, pending_backfills)


def _on_grid(instant: datetime, period: float) -> bool:
    """Whether `instant` is one of the schedule's (in whole microseconds, no rounding)."""
    return (instant - _EPOCH) // _MICROSECOND % round(period * 1e6) == 0


def _pause_spans(steers: list[Event], ended: int) -> list[tuple[int, float, int]]:
    """Each pause in force: (its return's stamp, its return's wall time, the resume's
    `sent` stamp or `ended`). A pause sent again while paused only renews it."""
    spans: list[tuple[int, float, int]] = []
    open_at: tuple[int, float] | None = None
    for event in steers:
        if event["op"] == "pause" and event["phase"] == "done" and open_at is None:
            open_at = (int(event["t"]), float(event["wall"]))
        elif event["op"] == "resume" and event["phase"] == "sent" and open_at is not None:
            spans.append((*open_at, int(event["t"])))
            open_at = None
    if open_at is not None:
        spans.append((*open_at, ended))
    return spans


def _check_paused(
    steered: list[BodyRun],
    steers: list[Event],
    events: list[Event],
    report: CheckReport,
    period: float,
    ended: int,
) -> None:
    for returned, wall, resumed in _pause_spans(steers, ended):
        latest = datetime.fromtimestamp(wall, UTC) + timedelta(seconds=CLOCK_OFFSET_SECONDS)
        for run in steered:
            if not returned < run.start < resumed or not _on_grid(run.instant, period):
                continue
            if run.instant <= latest:
                report.steering["fires run while pausing (read before the pause)"] += 1
                continue
            _violation(
                report,
                events,
                "paused",
                f"{run.describe()} started after pause returned at "
                f"{datetime.fromtimestamp(wall, UTC).isoformat()} (stamp {returned}), "
                "before the resume",
                run.start,
            )


def _check_triggers(
    steered: list[BodyRun],
    done: list[Event],
    history: dict[HistoryKey, HistoryRow],
    events: list[Event],
    window: Window,
    report: CheckReport,
) -> None:
    ran = {run.key for run in steered}
    excuses = MissExcuses.of(events)
    for event in done:
        if event["op"] != "trigger":
            continue
        key = key_of(STEERED, parse_instant(event["instant"]))
        if not window.start <= key.instant < window.end:
            continue
        report.steering["triggers checked"] += 1
        if key in ran:
            report.steering["triggers run"] += 1
            continue
        record = history.get(key)
        miss = excuses.reason(key, record, window.monotonic(key.instant))
        state = "no record" if record is None else f"a {record.state!r} record and no body run"
        _miss_or_violation(
            report,
            events,
            None if miss is None else f"trigger {miss}",
            "trigger-once",
            f"trigger {event['id']} of {STEERED} @ {key.instant.isoformat()} never ran ({state})",
            int(event["t"]),
        )


def _check_backfills(
    steered: list[BodyRun],
    backfills: list[Event],
    history: dict[HistoryKey, HistoryRow],
    events: list[Event],
    window: Window,
    report: CheckReport,
    period: float,
    pending: Collection[tuple[str, str]],
) -> None:
    ran = {run.key for run in steered}
    checked: set[HistoryKey] = set()
    for event in backfills:
        start, end = parse_instant(event["start"]), parse_instant(event["end"])
        unfinished = (event["start"], event["end"]) in pending
        for key in _grid(start, end, period):
            if key in checked or not window.start <= key.instant < window.end:
                continue
            checked.add(key)
            report.steering["backfilled fires checked"] += 1
            if key in ran:
                continue
            record = history.get(key)
            miss = None
            if unfinished:
                miss = "backfill unfinished when the nodes stopped"
            elif record is not None and record.state in _DIED:
                miss = f"backfilled: its run died before its body ({record.state})"
            state = "no record" if record is None else f"a {record.state!r} record"
            _miss_or_violation(
                report,
                events,
                miss,
                "backfill-once",
                f"{STEERED} @ {key.instant.isoformat()} in the backfill "
                f"[{event['start']}, {event['end']}) never ran ({state}), and the "
                "request is gone",
                int(event["t"]),
            )


def _violation(report: CheckReport, events: list[Event], rule: str, message: str, at: int) -> None:
    report.violations.append(Violation(rule, message, at, violation_context(events, at)))


def _miss_or_violation(
    report: CheckReport,
    events: list[Event],
    miss: str | None,
    rule: str,
    message: str,
    at: int,
) -> None:
    """Count `miss` where faults explain it; else report the violation of `rule`."""
    if miss is not None:
        report.misses[miss] += 1
    else:
        _violation(report, events, rule, message, at)


def _grid(start: datetime, end: datetime, period: float) -> list[HistoryKey]:
    """The schedule's instants in `[start, end)` (epoch-aligned, every `period` s)."""
    step = timedelta(seconds=period)
    first = int(-(-(start - _EPOCH).total_seconds() // period))
    instant = _EPOCH + first * step
    keys = []
    while instant < end:
        keys.append(key_of(STEERED, instant))
        instant += step
    return keys
