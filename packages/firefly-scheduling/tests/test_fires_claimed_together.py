"""`FireRunner.claim_fires`: the claims of one instant taken together, then run.

The resident host's claimer thread (`hosts.claim_first`) claims a batch, then hands
each fire its outcome (`run(..., claim=)`). The rules of a fire claimed on its own
must hold: each claim's own answer, a too-late fire recorded, a won claim run once.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import HistoryError, MemoryRunHistory, RunState
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def task(**options: Any) -> ScheduledDescriptor:
    target = f"tests.together_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=target, lock_name=target, fixed_rate=1.0, **options)


class CountedSkips(MemoryRunHistory):
    """The memory history counting `skip` calls, failing them while `down` is set."""

    def __init__(self, *, down: bool = False) -> None:
        super().__init__()
        self.down = down
        self.skip_calls = 0

    def skip(self, task: str, instant: datetime, **kwargs: Any) -> bool:
        self.skip_calls += 1
        if self.down:
            raise HistoryError("the history is unreachable (injected)")
        return super().skip(task, instant, **kwargs)


def test_each_fire_gets_its_own_answer_and_the_won_ones_run_once() -> None:
    lock = InMemoryLock()
    history = MemoryRunHistory()
    runner = FireRunner(lock, history=history, clock=lambda: T0 + 0.1 * SECOND)
    won, lost, late = task(), task(), task()
    assert lock.try_acquire(claim_name(lost.target, lost.lock_name or "", T0), 30)
    outcomes = runner.claim_fires(
        [Fire.at(won, T0), Fire.at(lost, T0), Fire.at(late, T0 - 600 * SECOND)]
    )
    assert [outcome.verdict for outcome in outcomes] == [
        Verdict.SUCCEEDED,
        Verdict.CLAIMED_ELSEWHERE,
        Verdict.TOO_LATE,
    ]
    ran: list[str] = []
    results = [
        runner.run(
            Fire.at(descriptor, at), lambda d=descriptor: ran.append(d.target), claim=outcome
        )
        for (descriptor, at), outcome in zip(
            [(won, T0), (lost, T0), (late, T0 - 600 * SECOND)], outcomes, strict=True
        )
    ]
    assert [result.verdict for result in results] == [
        Verdict.SUCCEEDED,
        Verdict.CLAIMED_ELSEWHERE,
        Verdict.TOO_LATE,
    ]
    assert ran == [won.target], "only the fire won ran"
    assert all(result.claim_seconds is not None for result in results[:2])
    assert [record.state for record in history.runs(won.target)] == [RunState.SUCCEEDED]
    assert [record.state for record in history.runs(late.target)] == [RunState.SKIPPED]
    assert history.runs(lost.target) == [], "a lost fire is the winner's to record"


def test_a_claim_won_in_the_batch_is_not_won_again() -> None:
    lock = InMemoryLock()
    runner = FireRunner(lock, clock=lambda: T0)
    descriptor = task()
    [first] = runner.claim_fires([Fire.at(descriptor, T0)])
    [again] = runner.claim_fires([Fire.at(descriptor, T0)])
    assert (first.verdict, again.verdict) == (Verdict.SUCCEEDED, Verdict.CLAIMED_ELSEWHERE)


def test_a_failing_skip_record_is_tried_once_in_the_batch_then_written_later() -> None:
    """The batch's other fires wait for its records: no 2-second retry per fire."""
    history = CountedSkips(down=True)
    runner = FireRunner(InMemoryLock(), history=history, clock=lambda: T0)
    late = [task() for _ in range(3)]
    outcomes = runner.claim_fires([Fire.at(descriptor, T0 - 600 * SECOND) for descriptor in late])
    assert {outcome.verdict for outcome in outcomes} == {Verdict.TOO_LATE}
    assert history.skip_calls == 3, "a skip record was retried inside the batch"
    history.down = False
    fresh = task()
    runner.run(Fire.at(fresh, T0), lambda: None)  # the remembered skips are written first
    for descriptor in late:
        assert [record.state for record in history.runs(descriptor.target)] == [RunState.SKIPPED]


def test_only_locked_recurring_fires_are_claimed_ahead() -> None:
    runner = FireRunner(InMemoryLock(), clock=lambda: T0)
    unlocked = ScheduledDescriptor(target="tests.together:free", fixed_rate=1.0)
    with pytest.raises(ValueError, match=r"tests\.together:free"):
        runner.claim_fires([Fire.at(unlocked, T0)])


def test_a_won_fire_that_waited_beyond_grace_for_a_worker_does_not_start() -> None:
    """Claimed in time, then stalled (a saturated pool, a stopped process): the fire
    must not start past grace, where its claim's window may already have ended."""
    now = [T0]
    history = MemoryRunHistory()
    runner = FireRunner(InMemoryLock(), history=history, clock=lambda: now[0], grace=5.0)
    descriptor = task()
    [claim] = runner.claim_fires([Fire.at(descriptor, T0)])
    assert claim.verdict is Verdict.SUCCEEDED
    now[0] = T0 + 6 * SECOND
    ran: list[str] = []
    result = runner.run(Fire.at(descriptor, T0), lambda: ran.append("body"), claim=claim)
    assert result.verdict is Verdict.TOO_LATE
    assert ran == []
    assert [record.state for record in history.runs(descriptor.target)] == [RunState.SKIPPED]
