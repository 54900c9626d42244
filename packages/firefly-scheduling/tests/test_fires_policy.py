"""The policy seam (`fires.policy`): where each stage asks about a fire, with what.

A recording policy proves the stages consult it at every point, in the fire's order,
with the very `Fire` the host made; the default policy keeps today's verdicts. The
fire's identity through the stages is checked too: the result carries the host's
`Fire`, its trigger kind included (the runner used to rebuild it as a scheduled one).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.fires.outcome import Fire, TriggerKind, Verdict
from firefly_scheduling.fires.policy import (
    RUN,
    BeforeBody,
    BeforeClaim,
    BeforeStart,
    BodyEnded,
    DefaultPolicy,
    LockHeld,
    Run,
    RunAgain,
    RunWithin,
    Skip,
)
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def task() -> ScheduledDescriptor:
    """A locked recurring task with a unique name (the memory lock is process-wide)."""
    target = f"tests.policy_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=target, lock_name=target, lock_ttl=30.0, fixed_rate=1.0)


@dataclass
class RecordingPolicy(DefaultPolicy):
    """Today's answers, with every question written down: (point, fire, facts)."""

    asked: list[tuple[str, Fire, object]] = field(default_factory=list)
    skip_before_claim: Skip | None = None

    def before_claim(self, fire: Fire, facts: BeforeClaim) -> Run | Skip:
        self.asked.append(("before_claim", fire, facts))
        return self.skip_before_claim or super().before_claim(fire, facts)

    def before_start(self, fire: Fire, facts: BeforeStart) -> Run | Skip:
        self.asked.append(("before_start", fire, facts))
        return super().before_start(fire, facts)

    def when_held(self, fire: Fire, facts: LockHeld) -> Skip:
        self.asked.append(("when_held", fire, facts))
        return super().when_held(fire, facts)

    def before_body(self, fire: Fire, facts: BeforeBody) -> Run | RunWithin:
        self.asked.append(("before_body", fire, facts))
        return super().before_body(fire, facts)

    def after_body(self, fire: Fire, facts: BodyEnded) -> Run | RunAgain | Skip:
        self.asked.append(("after_body", fire, facts))
        return super().after_body(fire, facts)

    def at_record(self, fire: Fire, facts: BodyEnded) -> None:
        self.asked.append(("at_record", fire, facts))

    @property
    def points(self) -> list[str]:
        return [point for point, _, _ in self.asked]


def runner(
    policy: DefaultPolicy, history: MemoryRunHistory | None, *, now: datetime = T0
) -> FireRunner:
    return FireRunner(InMemoryLock(), history=history, clock=lambda: now, policy=policy)


class TestTheSeamIsConsulted:
    def test_a_fire_that_runs_is_asked_about_at_each_point_in_order(self) -> None:
        policy = RecordingPolicy()
        history = MemoryRunHistory()
        fire = Fire.at(task(), T0, TriggerKind.MANUAL)
        result = runner(policy, history, now=T0 + SECOND / 2).run(fire, lambda: None)
        assert result.verdict is Verdict.SUCCEEDED
        assert policy.points == [
            "before_claim",
            "before_start",
            "before_body",
            "after_body",
            "at_record",
        ]
        assert all(asked is fire for _, asked, _ in policy.asked)  # one value, never rebuilt
        claim, start, body, ended, recorded = (facts for _, _, facts in policy.asked)
        assert claim == BeforeClaim(late_seconds=0.5)
        assert start == BeforeStart()  # no control store: nothing paused
        assert body == BeforeBody(attempt=1, token=result.token)
        assert recorded is ended
        assert isinstance(ended, BodyEnded)
        assert (ended.verdict, ended.attempt, ended.error, ended.finished) == (
            Verdict.SUCCEEDED,
            1,
            None,
            True,
        )

    def test_the_result_carries_the_hosts_fire_trigger_kind_included(self) -> None:
        """The runner rebuilt the result's fire with `Fire.at(task, instant)`: every
        result said `scheduled`, whatever made the fire."""
        ran = Fire.at(task(), T0, TriggerKind.BACKFILL)
        held = Fire.at(task(), T0, TriggerKind.MANUAL)
        elsewhere = Fire.at(task(), T0, TriggerKind.RUNTIME)
        lock = InMemoryLock()
        assert lock.try_acquire(held.target, 30)  # an earlier run holds its task lock
        assert lock.try_acquire(claim_name(elsewhere.target, elsewhere.target, T0), 30)
        node = FireRunner(lock, history=MemoryRunHistory(), clock=lambda: T0)
        for fire, verdict in (
            (ran, Verdict.SUCCEEDED),
            (held, Verdict.OVERLAPPING),
            (elsewhere, Verdict.CLAIMED_ELSEWHERE),
        ):
            result = node.run(fire, lambda: None)
            assert (result.verdict, result.fire.trigger) == (verdict, fire.trigger)
            assert result.fire is fire

    def test_a_held_task_lock_asks_the_policy_how_to_skip(self) -> None:
        policy = RecordingPolicy()
        history = MemoryRunHistory()
        descriptor = task()
        lock = InMemoryLock()
        assert lock.try_acquire(descriptor.target, 30)  # the previous fire still runs
        fire = Fire.at(descriptor, T0)
        result = FireRunner(lock, history=history, clock=lambda: T0, policy=policy).run(
            fire, lambda: None
        )
        assert result.verdict is Verdict.OVERLAPPING
        assert policy.points == ["before_claim", "when_held"]
        [(_, asked, held)] = [entry for entry in policy.asked if entry[0] == "when_held"]
        assert asked is fire
        assert isinstance(held, LockHeld)
        assert held.lock_name == descriptor.target
        assert "still ran" in held.why
        [record] = history.runs(descriptor.target)
        assert (record.state, record.error) == (RunState.SKIPPED, held.why)

    def test_a_skip_before_the_claim_takes_nothing_and_is_recorded(self) -> None:
        policy = RecordingPolicy(skip_before_claim=Skip(Verdict.HELD_BACK, "paused (test)"))
        history = MemoryRunHistory()
        descriptor = task()
        lock = InMemoryLock()
        fire = Fire.at(descriptor, T0)
        result = FireRunner(lock, history=history, clock=lambda: T0, policy=policy).run(
            fire, lambda: None
        )
        assert (result.verdict, result.fire) == (Verdict.HELD_BACK, fire)
        assert policy.points == ["before_claim"]
        # No claim was taken: another node may still claim the fire.
        assert lock.try_acquire(claim_name(fire.target, descriptor.target, T0), 1)
        [record] = history.runs(descriptor.target)
        assert (record.state, record.error) == (RunState.SKIPPED, "paused (test)")

    def test_claims_taken_together_ask_before_each_claim(self) -> None:
        policy = RecordingPolicy()
        fires = [Fire.at(task(), T0), Fire.at(task(), T0)]
        outcomes = runner(policy, MemoryRunHistory()).claim_fires(fires)
        assert [outcome.verdict for outcome in outcomes] == [Verdict.SUCCEEDED] * 2
        assert [(point, fire) for point, fire, _ in policy.asked] == [
            ("before_claim", fires[0]),
            ("before_claim", fires[1]),
        ]

    def test_an_adopted_run_is_asked_about_as_its_own_fire_made_from_its_record(self) -> None:
        policy = RecordingPolicy()
        history = MemoryRunHistory()
        descriptor = task()
        died = history.start(
            descriptor.target, T0, lock=descriptor.target, node="d", token=None, at=T0
        )
        assert died == 1  # a run whose node died: its record stays `running`
        fire = Fire.at(descriptor, T0 + SECOND, TriggerKind.MANUAL)
        result = runner(policy, history, now=T0 + SECOND).run(fire, lambda: None)
        [adopted] = result.adopted
        assert (adopted.verdict, adopted.attempt) == (Verdict.SUCCEEDED, 2)
        assert adopted.fire == Fire(descriptor, T0, TriggerKind.SCHEDULED)
        bodies = [(point, asked) for point, asked, _ in policy.asked if point == "before_body"]
        assert bodies == [("before_body", adopted.fire), ("before_body", fire)]
        assert bodies[0][1] is adopted.fire  # made once, from its record

    def test_the_asyncio_runner_asks_at_the_same_points(self) -> None:
        policy = RecordingPolicy()
        fire = Fire.at(task(), T0)

        async def body() -> None:
            await asyncio.sleep(0)

        async def scenario() -> Verdict:
            runner = AsyncFireRunner(
                AsyncInMemoryLock(), history=MemoryRunHistory(), clock=lambda: T0, policy=policy
            )
            return (await runner.run(fire, body)).verdict

        assert asyncio.run(scenario()) is Verdict.SUCCEEDED
        assert policy.points == [
            "before_claim",
            "before_start",
            "before_body",
            "after_body",
            "at_record",
        ]
        assert all(asked is fire for _, asked, _ in policy.asked)


class TestTheDefaultKeepsTodaysVerdicts:
    def test_every_answer_is_run_but_a_held_lock_which_skips_as_overlapping(self) -> None:
        policy = DefaultPolicy()
        fire = Fire.at(task(), T0)
        ended = BodyEnded(Verdict.FAILED, 1, None, "ValueError: x", T0, T0, False, True)
        assert policy.before_claim(fire, BeforeClaim(0.0)) is RUN
        assert policy.before_body(fire, BeforeBody(1, None)) is RUN
        assert policy.after_body(fire, ended) is RUN
        policy.at_record(fire, ended)  # told, not asked: nothing to answer
        why = "the previous fire still ran (lock 'x' held)"
        assert policy.when_held(fire, LockHeld("x", why)) == Skip(Verdict.OVERLAPPING, why)

    def test_a_runner_given_no_policy_reaches_the_same_verdicts(self) -> None:
        """One fire per verdict the default answers for, with and without it given."""

        def fail() -> None:
            raise ValueError("boom")

        now = T0 + 90 * SECOND
        for given in (False, True):
            history = MemoryRunHistory()
            lock = InMemoryLock()
            held, late, ran, failed = (task() for _ in range(4))
            assert lock.try_acquire(held.target, 30)
            if given:
                node = FireRunner(lock, history=history, clock=lambda: now, policy=DefaultPolicy())
            else:
                node = FireRunner(lock, history=history, clock=lambda: now)
            verdicts = [
                node.run(Fire.at(held, now), lambda: None).verdict,
                node.run(Fire.at(late, T0), lambda: None).verdict,
                node.run(Fire.at(ran, now), lambda: None).verdict,
                node.run(Fire.at(failed, now), fail).verdict,
            ]
            assert verdicts == [
                Verdict.OVERLAPPING,
                Verdict.TOO_LATE,
                Verdict.SUCCEEDED,
                Verdict.FAILED,
            ]
            states = [history.runs(t.target)[0].state for t in (held, late, ran, failed)]
            assert states == [
                RunState.SKIPPED,
                RunState.SKIPPED,
                RunState.SUCCEEDED,
                RunState.FAILED,
            ]
