"""A run whose task lock was lost while it ran, and whose record another node closed
`expired` meanwhile: its real end is recorded. Found by benchmarks/chaos.py (rule 4,
`recorded`): a node SIGSTOPped past its lease, the task's next fire on another node
expired its record, and the body's success was never written over it."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.history.base import LATE_END_NOTE
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)


#: The task lock's lease: the stalled run's lapses while its body runs.
LOCK_TTL = 2.0


class NoRenewal(InMemoryLock):
    """The memory lock without renewals: a lease lapses while a long body runs (the
    other node's renews: both share the process's lock table)."""

    renewable = False


def test_a_run_expired_by_another_node_while_its_lock_was_lost_records_its_end() -> None:
    target = f"tests.late_end_{uuid.uuid4().hex}:job"
    task = ScheduledDescriptor(target=target, lock_name=target, lock_ttl=LOCK_TTL, fixed_rate=60.0)
    history = MemoryRunHistory()
    stalled = FireRunner(NoRenewal(), history=history, clock=lambda: T0, node="stalled")
    later = T0 + timedelta(minutes=5)  # the fire at T0 is past grace there
    other = FireRunner(InMemoryLock(), history=history, clock=lambda: later, node="other")
    began, expired = threading.Event(), threading.Event()

    def long_body() -> None:
        began.set()
        assert expired.wait(10), "the other node never expired this run"

    outcomes = []
    first = threading.Thread(
        target=lambda: outcomes.append(stalled.run(Fire.at(task, T0), long_body))
    )
    first.start()
    assert began.wait(10)
    threading.Event().wait(LOCK_TTL + 0.5)  # the stalled run's lease lapses
    newer = other.run(Fire.at(task, later), lambda: None)
    assert newer.verdict is Verdict.SUCCEEDED
    [closed] = newer.adopted
    assert closed.verdict is Verdict.EXPIRED
    assert history.runs(target)[-1].state is RunState.EXPIRED
    expired.set()
    first.join(10)
    [outcome] = outcomes
    assert outcome.verdict is Verdict.SUCCEEDED
    assert outcome.lost
    assert not outcome.fenced, "no newer attempt owns the fire's record"
    record = history.runs(target)[-1]
    assert (record.instant, record.node, record.attempt) == (T0, "stalled", 1)
    assert (record.state, record.token) == (RunState.SUCCEEDED, outcome.token)
    assert record.error == LATE_END_NOTE
