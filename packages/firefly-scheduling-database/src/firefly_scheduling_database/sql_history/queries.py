"""The run history's reads and clean-ups for operators: `runs`, `monitor`, `prune`.

Unlike a fire's statements (`statements`), these run seldom, so each is built when
asked, with its values inline.
"""

from __future__ import annotations

from collections.abc import Set
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from firefly_scheduling.history.port import (
    EXPIRED_BY_PRUNE,
    FAILURE_STATES,
    SUCCESS_STATES,
    RunState,
)
from firefly_scheduling.schedule.instants import as_utc


def expire_dead(runs: sa.Table, started_before: datetime, *, at: datetime) -> sa.Update:
    """Mark as expired every run still `running` that started before `started_before`."""
    return (
        runs.update()
        .where(
            runs.c.state == RunState.RUNNING.value,
            runs.c.started_at < as_utc(started_before),
        )
        .values(state=RunState.EXPIRED.value, ended_at=as_utc(at), error=EXPIRED_BY_PRUNE)
    )


def prune(runs: sa.Table, before: datetime) -> sa.Delete:
    """Delete the records of fires before `before`, but no run still `running`."""
    return runs.delete().where(
        runs.c.state != RunState.RUNNING.value, runs.c.instant < as_utc(before)
    )


def newest(runs: sa.Table, task: str | None, limit: int, *, lock: str | None) -> sa.Select[Any]:
    """The newest `limit` records, of one task and one lock when given."""
    query = sa.select(runs).order_by(
        runs.c.instant.desc(), runs.c.task.desc(), runs.c.lock_name.desc()
    )
    if task is not None:
        query = query.where(runs.c.task == task)
    if lock is not None:
        query = query.where(runs.c.lock_name == lock)
    return query.limit(max(limit, 0))


def instants_between(
    runs: sa.Table,
    task: str,
    *,
    lock: str,
    after: datetime,
    until: datetime,
    states: Set[RunState] | None = None,
) -> sa.Select[Any]:
    """The instants of `task`'s records under `lock` in `(after, until]`, in `states`
    (any state when None)."""
    query = sa.select(runs.c.instant).where(
        runs.c.lock_name == lock,
        runs.c.task == task,
        runs.c.instant > as_utc(after),
        runs.c.instant <= as_utc(until),
    )
    if states is not None:
        query = query.where(runs.c.state.in_(sorted(state.value for state in states)))
    return query


def records_between(
    runs: sa.Table,
    task: str,
    *,
    lock: str,
    after: datetime,
    until: datetime,
    states: Set[RunState],
) -> sa.Select[Any]:
    """`task`'s records under `lock` in `(after, until]` and in `states`, oldest first."""
    return (
        sa.select(runs)
        .where(
            runs.c.lock_name == lock,
            runs.c.task == task,
            runs.c.instant > as_utc(after),
            runs.c.instant <= as_utc(until),
            runs.c.state.in_(sorted(state.value for state in states)),
        )
        .order_by(runs.c.instant)
    )


def last_success(runs: sa.Table, task: str, *, lock: str) -> sa.Select[Any]:
    """The newest succeeded run of `task` under `lock`."""
    return (
        sa.select(runs)
        .where(
            runs.c.lock_name == lock,
            runs.c.task == task,
            runs.c.state.in_(sorted(state.value for state in SUCCESS_STATES)),
        )
        .order_by(runs.c.instant.desc())
        .limit(1)
    )


def failures_since(runs: sa.Table, since: datetime) -> sa.Select[Any]:
    """The runs that failed, expired or timed out since `since`, newest first."""
    return (
        sa.select(runs)
        .where(
            runs.c.state.in_(sorted(state.value for state in FAILURE_STATES)),
            runs.c.ended_at >= as_utc(since),
        )
        .order_by(runs.c.instant.desc())
    )
