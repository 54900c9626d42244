"""The guarded success `UPDATE` a run sends in the task's own transaction.

Guarded like the history's `finish`, and more strictly: the fire's row must be
`running` under this run's attempt AND its fencing token (`token = :token`, or both
NULL), so a zombie whose fire a newer attempt took over matches nothing, and neither
does a run whose record is already finished. Parametrised; built once per store.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from firefly_scheduling.fires.atomic import GuardedSuccess
from firefly_scheduling.history.port import RunState


def success_statements(runs: sa.Table) -> dict[bool, sa.Update]:
    """The guarded success `UPDATE` of `runs`, by whether the run has no token."""
    columns = runs.c
    return {
        tokenless: runs.update()
        .where(
            columns.lock_name == sa.bindparam("p_lock_name"),
            columns.task == sa.bindparam("p_task"),
            columns.instant == sa.bindparam("p_instant"),
            columns.state == RunState.RUNNING.value,
            columns.attempt == sa.bindparam("p_attempt"),
            columns.token.is_(None) if tokenless else columns.token == sa.bindparam("p_token"),
        )
        .values(
            state=RunState.SUCCEEDED.value, ended_at=sa.bindparam("p_ended_at"), error=sa.null()
        )
        for tokenless in (False, True)
    }


def success_parameters(success: GuardedSuccess) -> dict[str, Any]:
    """The statement's parameters for `success` (`p_token` only where it has one)."""
    parameters: dict[str, Any] = {
        "p_lock_name": success.lock,
        "p_task": success.task,
        "p_instant": success.instant,
        "p_attempt": success.attempt,
        "p_ended_at": success.ended_at,
    }
    if success.token is not None:
        parameters["p_token"] = success.token
    return parameters
