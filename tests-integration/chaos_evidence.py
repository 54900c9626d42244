"""Synthetic evidence for the chaos checker's own tests: runs, faults and their history.

`benchmarks/chaos.py` is only worth its "0 violations" if its checker reports the
violations it exists for. Its tests build small evidence logs from these pieces (what
the task bodies and the harness would append) and a history, and assert the verdict.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from chaos_harness.checker import CheckReport, Window, check
from chaos_harness.history import HistoryKey, HistoryRow, key_of

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
SECOND = 1_000_000_000
#: One task firing every second, and a second one sharing its lock.
SCHEDULES = {"app:a": 1.0}
WINDOW = Window(start=T0, end=T0 + timedelta(seconds=3), wall=T0, mono=100 * SECOND)


def mono_at(seconds: float) -> int:
    return WINDOW.mono + int(seconds * SECOND)


def run(
    instant: float,
    start: float,
    end: float | None,
    *,
    pid: int = 1,
    target: str = "app:a",
    lock: str = "L",
    attempt: int = 1,
    token: int | None = 1,
    lost: bool = False,
) -> list[dict[str, Any]]:
    """The start (and end) events of one body run."""
    fields = {
        "pid": pid,
        "node": f"n{pid}",
        "target": target,
        "lock": lock,
        "instant": (T0 + timedelta(seconds=instant)).isoformat(),
        "attempt": attempt,
        "token": token,
    }
    events = [{"ev": "start", "t": mono_at(start), **fields}]
    if end is not None:
        events.append({"ev": "end", "t": mono_at(end), "lost": lost, **fields})
    return events


def every_fire_ran() -> list[dict[str, Any]]:
    return [e for i in range(3) for e in run(i, i + 0.01, i + 0.02, token=i + 1)]


def recorded_as_run(events: list[dict[str, Any]]) -> dict[HistoryKey, HistoryRow]:
    """The history a runner leaves for `events`: each fire that ran recorded as its
    newest run (by token, then attempt), succeeded."""
    newest: dict[HistoryKey, dict[str, Any]] = {}
    for event in events:
        if event["ev"] != "start":
            continue
        key = key_of(event["target"], datetime.fromisoformat(event["instant"]))
        order = (event["token"] or 0, event["attempt"])
        if key not in newest or order > (newest[key]["token"] or 0, newest[key]["attempt"]):
            newest[key] = event
    return {
        key: HistoryRow(key, e["lock"], "succeeded", e["attempt"], e["node"], e["token"], None)
        for key, e in newest.items()
    }


def checked(
    events: list[dict[str, Any]],
    history: dict[HistoryKey, HistoryRow] | None = None,
    *,
    volatile_server: bool = False,
) -> CheckReport:
    """`check` of `events`; the history is what the runner would have recorded for
    them (`recorded_as_run`), with `history`'s records in place of its own."""
    recorded = recorded_as_run(events) | (history or {})
    return checked_against(events, recorded, volatile_server=volatile_server)


def checked_against(
    events: list[dict[str, Any]],
    history: dict[HistoryKey, HistoryRow],
    *,
    volatile_server: bool = False,
) -> CheckReport:
    """`check` of `events` against exactly `history` (a record left out stays out)."""
    events = sorted(events, key=lambda e: int(e["t"]))
    return check(
        events, history, SCHEDULES, WINDOW, ended=mono_at(60), volatile_server=volatile_server
    )


def rules(report: CheckReport) -> list[str]:
    return [violation.rule for violation in report.violations]


def refused_start(pid: int, instant: float, at: float) -> dict[str, Any]:
    return {
        "ev": "history_refused",
        "t": mono_at(at),
        "pid": pid,
        "write": "start",
        "target": "app:a",
        "instant": str(T0 + timedelta(seconds=instant)),
        "injected": True,
    }


def server_restart(
    at: float, *, down_after: float | None = None, back_after: float = 0.05
) -> list[dict[str, Any]]:
    """A restart that took `back_after` seconds (50 ms), as the nemesis stamps it;
    `down_after` seconds after its start, the stamp of the killed server reaped (logs
    before it had none)."""
    events = [
        {"ev": "restarting", "t": mono_at(at), "pid": 0, "node": "server"},
        {
            "ev": "fault",
            "t": mono_at(at + back_after),
            "pid": 0,
            "kind": "restart",
            "node": "server",
        },
    ]
    if down_after is not None:
        events.append(
            {"ev": "server_down", "t": mono_at(at + down_after), "pid": 0, "node": "server"}
        )
    return events
