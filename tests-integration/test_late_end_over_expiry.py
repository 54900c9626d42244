"""A run whose task lock was lost while it ran, expired meanwhile by another node,
records its real end: on the SQL history of every server.

Found by the fault checker (rule `recorded`; PostgreSQL, MySQL, the database backend
on SQLite): a node SIGSTOPped past its lease, the task's next fire on another node
found the run's record `running` past grace and closed it `expired`, and the body's
success, once the node woke, was never written over that expiry. Each node here has
a history client of its own on one fresh table; the lock is the memory lock without
renewals, so the stalled run's lease lapses while its body runs.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunState
from firefly_scheduling.history.base import LATE_END_NOTE
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from fresh_tables import installed_history

T0 = datetime(2030, 1, 1, tzinfo=UTC)
#: The task's next fire, on the other node: the stalled run's fire is past grace there.
LATER = T0 + timedelta(minutes=5)


#: The task lock's lease: the stalled run's lapses while its body runs.
LOCK_TTL = 2.0


class NoRenewal(InMemoryLock):
    """The memory lock without renewals: a lease lapses while a long body runs (the
    other node's renews: both share the process's lock table)."""

    renewable = False


@pytest.fixture
def two_clients(sql_history_url: str) -> Iterator[tuple[SqlRunHistory, SqlRunHistory]]:
    with installed_history(sql_history_url) as first:
        second = SqlRunHistory(sql_history_url, table=first.table.name)
        try:
            yield first, second
        finally:
            second.close()


def test_the_late_end_of_an_expired_run_is_recorded(
    two_clients: tuple[SqlRunHistory, SqlRunHistory],
) -> None:
    stalled_history, other_history = two_clients
    target = f"tests.late_end_{uuid.uuid4().hex}:job"
    task = ScheduledDescriptor(target=target, lock_name=target, lock_ttl=LOCK_TTL, fixed_rate=60.0)
    stalled = FireRunner(NoRenewal(), history=stalled_history, clock=lambda: T0, node="stalled")
    other = FireRunner(InMemoryLock(), history=other_history, clock=lambda: LATER, node="other")
    began, expired = threading.Event(), threading.Event()

    def long_body() -> None:
        began.set()
        assert expired.wait(30), "the other node never expired this run"

    outcomes: list[FireResult] = []
    thread = threading.Thread(
        target=lambda: outcomes.append(stalled.run(Fire.at(task, T0), long_body))
    )
    thread.start()
    try:
        assert began.wait(30)
        threading.Event().wait(LOCK_TTL + 0.5)  # the stalled run's lease lapses
        newer = other.run(Fire.at(task, LATER), lambda: None)
        assert newer.verdict is Verdict.SUCCEEDED
        assert [run.verdict for run in newer.adopted] == [Verdict.EXPIRED]
        [closed] = [r for r in other_history.runs(target) if r.instant == T0]
        assert (closed.state, closed.node) == (RunState.EXPIRED, "stalled")
    finally:
        expired.set()
        thread.join(30)
    [outcome] = outcomes
    assert (outcome.verdict, outcome.lost, outcome.fenced) == (Verdict.SUCCEEDED, True, False)
    [record] = [r for r in other_history.runs(target) if r.instant == T0]
    assert (record.node, record.attempt, record.token) == ("stalled", 1, outcome.token)
    assert record.state is RunState.SUCCEEDED
    assert record.error == LATE_END_NOTE
