"""The run history's rows as plain dicts: the records it inserts, and records read back.

The store's writes bind these (a skip, a new run), the batch paths compare them by
key (`row_key`), and every read turns a row into the port's `RunRecord`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from firefly_scheduling.history.base import RunStart, WholeRun
from firefly_scheduling.history.port import SCHEDULED, NewRun, RunRecord, RunState, clip_error
from firefly_scheduling.schedule.instants import as_utc


def skipped_row(
    lock: str,
    task: str,
    instant: datetime,
    *,
    node: str,
    reason: str,
    at: datetime,
    state: RunState = RunState.SKIPPED,
    trigger: str = SCHEDULED,
    requested_by: str | None = None,
) -> dict[str, Any]:
    """The row of a fire nobody ran: the record `skip` and `skip_many` insert (and
    `buffer`, as `state` buffered)."""
    return {
        "lock_name": lock,
        "task": task,
        "instant": instant,
        "node": node,
        "attempt": 1,
        "state": state.value,
        "started_at": None,
        "ended_at": as_utc(at),
        "error": clip_error(reason),
        "token": None,
        "trigger_kind": trigger,
        "requested_by": requested_by,
    }


def running_row(run: NewRun, *, node: str, at: datetime) -> dict[str, Any]:
    """The row of a new run, attempt 1: the record `start_new_many` inserts."""
    return {
        "lock_name": run.lock,
        "task": run.task,
        "instant": as_utc(run.instant),
        "node": node,
        "attempt": 1,
        "state": RunState.RUNNING.value,
        "started_at": at,
        "ended_at": None,
        "error": None,
        "token": run.token,
        "trigger_kind": SCHEDULED,
        "requested_by": None,
    }


def fresh(
    rows: Sequence[dict[str, Any]], found: Iterable[Mapping[Any, Any]]
) -> list[dict[str, Any]]:
    """Those of `rows` (new runs) that no record in `found` stands in the way of.

    `found` holds the records of the rows' locks that are running or at one of the
    rows' fires (`HotStatements.in_the_way`): a running record keeps its task from
    starting another run, and a record at a row's own fire keeps that row out.
    """
    busy: set[tuple[str, str]] = set()
    recorded: set[tuple[str, str, datetime]] = set()
    for record in found:
        if record["state"] == RunState.RUNNING.value:
            busy.add((record["lock_name"], record["task"]))
        recorded.add(row_key(record))
    return [
        row
        for row in rows
        if (row["lock_name"], row["task"]) not in busy and row_key(row) not in recorded
    ]


def prefixed(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's values under the `p_<column>` names of the driver's insert."""
    return {f"p_{column}": value for column, value in row.items()}


def unprefixed(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row read back under the `p_<column>` names, under its columns' own."""
    return {column.removeprefix("p_"): value for column, value in row.items()}


def row_key(row: Mapping[str, Any]) -> tuple[str, str, datetime]:
    """A record's key: its lock, task and instant (UTC)."""
    return (row["lock_name"], row["task"], as_utc(row["instant"]))


def record(row: Mapping[Any, Any]) -> RunRecord:
    """The port's record of a row read back."""
    return RunRecord(
        task=row["task"],
        instant=row["instant"],
        node=row["node"],
        attempt=row["attempt"],
        state=RunState(row["state"]),
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        error=row["error"],
        token=row["token"],
        lock=row["lock_name"],
        trigger=row.get("trigger_kind") or SCHEDULED,
        requested_by=row.get("requested_by"),
    )


def started_row(begin: RunStart, key: dict[str, Any]) -> dict[str, Any]:
    """The row of a run `start` writes, attempt 1, under `key` (`statements.key_of`)."""
    return {
        **key,
        "node": begin.node,
        "attempt": 1,
        "state": RunState.RUNNING.value,
        "started_at": begin.at,
        "ended_at": None,
        "error": None,
        "token": begin.token,
        "trigger_kind": begin.trigger,
        "requested_by": begin.requested_by,
    }


def whole_run_row(run: WholeRun, key: dict[str, Any]) -> dict[str, Any]:
    """The row `record_run` inserts: the finished run, attempt 1, under `key`."""
    return {
        **key,
        "node": run.node,
        "attempt": 1,
        "state": run.state.value,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "error": run.error,
        "token": run.token,
        "trigger_kind": run.trigger,
        "requested_by": run.requested_by,
    }
