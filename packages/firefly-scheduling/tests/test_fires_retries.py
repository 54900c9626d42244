"""Retries through the fire runner (`fires.retries`), on the memory lock and history.

A failed fire comes back with its retry; run at its due time, the retry takes its own
claim and the fire's record over as the next attempt, until a run succeeds or the last
retry fails. A retry due at or after the next fire follows the task's `overlap=`:
skipped, its reason recorded, under `skip` and `cancel_other`; asked for otherwise.
The tests drive the runner with a clock they move, so no test waits for a backoff.
"""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.fires.outcome import Fire, FireResult, TriggerKind, Verdict
from firefly_scheduling.fires.policy import DEFAULT_POLICY, BodyEnded, RunAgain, Skip
from firefly_scheduling.fires.retries import RetryOf
from firefly_scheduling.fires.retry_policy import pending_retry
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.history.port import HistoryError
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.schedule.durations import parse_duration
from firefly_scheduling.schedule.retry_backoff import retry_delay
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_descriptor

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def task(**arguments: Any) -> ScheduledDescriptor:
    """A locked hourly task with a unique name (the memory lock is process-wide)."""
    target = f"tests.retries_{uuid.uuid4().hex}:job"
    schedule = arguments.pop("schedule", {"cron": "0 * * * *"})
    for name in ("retry_backoff", "retry_backoff_max", "timeout"):
        if name in arguments:
            arguments[name] = parse_duration(arguments[name])
    return validate_descriptor(
        ScheduledDescriptor(target=target, lock_name=target, **schedule, **arguments)
    )


@dataclass
class Clock:
    """The runner's wall clock; `body` moves it as a body taking time would."""

    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Body:
    """Fails its first `failures` runs; each run takes `seconds` of the test's clock."""

    clock: Clock
    failures: int
    seconds: float = 1.0
    runs: list[datetime] = field(default_factory=list)

    def __call__(self) -> None:
        self.runs.append(self.clock.now)
        self.clock.now += timedelta(seconds=self.seconds)
        if len(self.runs) <= self.failures:
            raise RuntimeError(f"run {len(self.runs)} fails")


def run_with_retries(runner: FireRunner, clock: Clock, fire: Fire, body: Body) -> list[FireResult]:
    """Run `fire`, then each retry its result asks for, at its due time."""
    results = [runner.run(fire, body)]
    while (retry := results[-1].retry) is not None:
        clock.now = max(clock.now, retry.due)
        results.append(runner.run(retry, body))
    return results


class TestAFailingFire:
    def test_is_retried_up_to_its_retries_each_as_the_next_attempt(self) -> None:
        descriptor = task(retries=3, retry_backoff="10s", retry_backoff_max="1m")
        clock, history = Clock(), MemoryRunHistory()
        runner = FireRunner(InMemoryLock(), history=history, clock=clock)
        body = Body(clock, failures=10)
        results = run_with_retries(runner, clock, Fire.at(descriptor, T0), body)
        assert [(r.verdict, r.attempt) for r in results] == [
            (Verdict.FAILED, 1),
            (Verdict.FAILED, 2),
            (Verdict.FAILED, 3),
            (Verdict.FAILED, 4),
        ]
        assert [r.fire.trigger for r in results] == [TriggerKind.SCHEDULED] + [
            TriggerKind.RETRY
        ] * 3
        assert [r.fire.retry.number for r in results[1:] if r.fire.retry] == [1, 2, 3]
        assert results[-1].retry is None  # the last retry failed: the task stays scheduled
        # Each retry started at its due time: the failed run's end plus its backoff.
        for failed, retry in itertools.pairwise(results):
            assert failed.ended_at is not None
            assert retry.fire.retry is not None
            number = retry.fire.retry.number
            delay = retry_delay(descriptor.target, T0, number, backoff=10.0, backoff_max=60.0)
            assert retry.fire.due == failed.ended_at + delay
            assert retry.started_at == retry.fire.due
        [record] = history.runs(descriptor.target)
        assert (record.state, record.attempt) == (RunState.FAILED, 4)
        assert record.error == "retry 3 of 3; RuntimeError: run 4 fails"

    def test_that_succeeds_on_its_second_attempt_stops_retrying(self) -> None:
        descriptor = task(retries=3, retry_backoff="1s", retry_backoff_max="1s")
        clock, history = Clock(), MemoryRunHistory()
        runner = FireRunner(InMemoryLock(), history=history, clock=clock)
        body = Body(clock, failures=1)
        results = run_with_retries(runner, clock, Fire.at(descriptor, T0), body)
        assert [(r.verdict, r.attempt) for r in results] == [
            (Verdict.FAILED, 1),
            (Verdict.SUCCEEDED, 2),
        ]
        assert len(body.runs) == 2
        [record] = history.runs(descriptor.target)
        assert (record.state, record.attempt, record.error) == (
            RunState.SUCCEEDED,
            2,
            "retry 1 of 3",
        )

    def test_records_the_retry_that_follows_while_it_waits(self) -> None:
        descriptor = task(retries=2, retry_backoff="1s", retry_backoff_max="1s")
        clock, history = Clock(), MemoryRunHistory()
        result = FireRunner(InMemoryLock(), history=history, clock=clock).run(
            Fire.at(descriptor, T0), Body(clock, failures=1)
        )
        assert result.retry is not None
        assert result.retry.retry is not None
        [record] = history.runs(descriptor.target)
        due = result.retry.retry.due.isoformat(timespec="milliseconds")
        assert record.error == f"RuntimeError: run 1 fails; retry 1 of 2 due {due}"
        assert (record.state, record.attempt) == (RunState.FAILED, 1)

    def test_a_timed_out_run_is_retried(self) -> None:
        descriptor = task(retries=1, retry_backoff="1s", retry_backoff_max="1s", timeout="1ms")
        clock = Clock()
        runner = FireRunner(InMemoryLock(), history=MemoryRunHistory(), clock=clock)

        def overrun() -> None:
            time.sleep(0.01)  # past its 1 ms timeout on the monotonic clock

        first = runner.run(Fire.at(descriptor, T0), overrun)
        assert first.verdict is Verdict.TIMED_OUT
        assert first.retry is not None
        assert first.retry.retry == RetryOf(1, 1, first.retry.due, after_attempt=1)

    def test_of_a_task_without_retries_is_not_retried(self) -> None:
        descriptor = task()
        clock, history = Clock(), MemoryRunHistory()
        result = FireRunner(InMemoryLock(), history=history, clock=clock).run(
            Fire.at(descriptor, T0), Body(clock, failures=1)
        )
        assert (result.verdict, result.retry) == (Verdict.FAILED, None)
        [record] = history.runs(descriptor.target)
        assert record.error == "RuntimeError: run 1 fails"


class TestOneRetryAcrossTheFleet:
    def test_two_runners_run_each_retry_once(self) -> None:
        """Two nodes handed the same retry: its claim lets one run it."""
        descriptor = task(retries=2, retry_backoff="1s", retry_backoff_max="1s")
        clock, history = Clock(), MemoryRunHistory()
        lock = InMemoryLock()
        first = FireRunner(lock, history=history, clock=clock, node="a")
        second = FireRunner(lock, history=history, clock=clock, node="b")
        body = Body(clock, failures=10)
        failed = first.run(Fire.at(descriptor, T0), body)
        assert failed.retry is not None
        clock.now = failed.retry.due
        results = [node.run(failed.retry, body) for node in (first, second)]
        assert [r.verdict for r in results] == [Verdict.FAILED, Verdict.CLAIMED_ELSEWHERE]
        assert len(body.runs) == 2

    def test_a_retry_s_claim_is_its_own_and_names_its_number(self) -> None:
        name = claim_name("app.tasks:job", "app.tasks:job", T0, 2)
        assert name == "firefly:fire:20300101T000000.000000Z~retry2:app.tasks:job"
        assert claim_name("app.tasks:job", "app.tasks:job", T0) != name
        assert claim_name("app.tasks:job", "app.tasks:job", T0, 1) != name
        long_target = "app.tasks:" + "j" * 220
        hashed = claim_name(long_target, long_target, T0, 3)
        assert hashed.startswith("firefly:fire:20300101T000000.000000Z~retry3:sha256:")
        assert len(hashed) <= 255

    def test_a_retry_whose_record_moved_on_is_not_run(self) -> None:
        """Its fire's record is no longer the failed attempt it follows (another node
        ran this retry, with its claim lapsed): the start is refused, the body not run."""
        descriptor = task(retries=2, retry_backoff="1s", retry_backoff_max="1s")
        clock, history = Clock(), MemoryRunHistory()
        body = Body(clock, failures=10)
        failed = FireRunner(InMemoryLock(), history=history, clock=clock).run(
            Fire.at(descriptor, T0), body
        )
        assert failed.retry is not None
        clock.now = failed.retry.due
        assert (
            history.start_retry(
                descriptor.target,
                T0,
                lock=descriptor.target,
                node="elsewhere",
                token=None,
                after_attempt=1,
                note="retry 1 of 2",
                at=clock.now,
            )
            == 2
        )
        result = FireRunner(InMemoryLock(), history=history, clock=clock).run(failed.retry, body)
        assert result.verdict is Verdict.ALREADY_RECORDED
        assert len(body.runs) == 1

    def test_a_retry_whose_start_cannot_be_recorded_is_not_run(self) -> None:
        """An adoption of the fire takes no claim, so a retry's claim does not keep it
        out: run unrecorded, a retry could run beside a node adopting the fire's record
        (still `running`, its failure unrecorded), both as attempt 2 (the fault
        checker's CI lane, database-postgres). The retry is not run; the record says
        what comes next (the sweep, or the next fire's adoption)."""

        class StartRetryFails(MemoryRunHistory):
            def start_retry(self, *args: object, **kwargs: object) -> int | None:
                raise HistoryError("history write failed (injected)")

        descriptor = task(retries=2, retry_backoff="1s", retry_backoff_max="1s")
        clock, history = Clock(), StartRetryFails()
        body = Body(clock, failures=10)
        runner = FireRunner(InMemoryLock(), history=history, clock=clock)
        failed = runner.run(Fire.at(descriptor, T0), body)
        assert failed.retry is not None
        clock.now = failed.retry.due
        result = runner.run(failed.retry, body)
        assert result.verdict is Verdict.BACKEND_ERROR
        assert result.error is not None
        assert "injected" in result.error
        assert len(body.runs) == 1, "the retry ran with its start unrecorded"
        [record] = history.runs(descriptor.target)
        assert (record.attempt, record.state) == (1, RunState.FAILED)

    def test_a_retry_never_overlaps_a_run_of_its_task(self) -> None:
        descriptor = task(retries=1, retry_backoff="1s", retry_backoff_max="1s")
        clock, history = Clock(), MemoryRunHistory()
        lock = InMemoryLock()
        body = Body(clock, failures=10)
        failed = FireRunner(lock, history=history, clock=clock).run(Fire.at(descriptor, T0), body)
        assert failed.retry is not None
        assert lock.try_acquire(descriptor.target, 30)  # another run of the task holds it
        clock.now = failed.retry.due
        result = FireRunner(lock, history=history, clock=clock).run(failed.retry, body)
        assert result.verdict is Verdict.OVERLAPPING
        assert len(body.runs) == 1


class TestARetryDueAfterTheNextFire:
    def test_is_skipped_and_its_reason_recorded(self) -> None:
        """A minutely task with a backoff of minutes: its retry would come after the
        next fire, which takes over (overlap='skip')."""

        def minutely() -> ScheduledDescriptor:
            return task(
                schedule={"cron": "* * * * *"},
                retries=2,
                retry_backoff="10m",
                retry_backoff_max="10m",
            )

        def first_delay(candidate: ScheduledDescriptor) -> timedelta:
            return retry_delay(candidate.target, T0, 1, backoff=600.0, backoff_max=600.0)

        # The draw depends on the (random) task name: take a task whose retry 1 is
        # drawn past the next fire (9 names in 10 are).
        descriptor = next(
            candidate
            for candidate in (minutely() for _ in range(1000))
            if first_delay(candidate) > timedelta(minutes=1)
        )
        clock, history = Clock(), MemoryRunHistory()
        result = FireRunner(InMemoryLock(), history=history, clock=clock).run(
            Fire.at(descriptor, T0), Body(clock, failures=1)
        )
        assert (result.verdict, result.retry) == (Verdict.FAILED, None)
        [record] = history.runs(descriptor.target)
        assert record.state is RunState.FAILED
        assert record.error is not None
        assert "retry 1 of 2 skipped: due " in record.error
        assert "not before the task's next fire at 2030-01-01T00:01:00.000+00:00" in record.error
        assert "the next fire takes over" in record.error

    def test_of_a_fixed_delay_task_counts_from_the_end_of_the_run(self) -> None:
        descriptor = task(
            schedule={"fixed_delay": 5.0}, retries=1, retry_backoff="1m", retry_backoff_max="1m"
        )
        delay = retry_delay(descriptor.target, T0, 1, backoff=60.0, backoff_max=60.0)
        ended = T0 + timedelta(seconds=1)
        facts = BodyEnded(Verdict.FAILED, 1, None, "boom", T0, ended, lost=False, finished=True)
        answer = DEFAULT_POLICY.after_body(Fire.at(descriptor, T0), facts)
        if delay >= timedelta(seconds=5):
            assert isinstance(answer, Skip)
            assert "next fire at 2030-01-01T00:00:06.000+00:00" in answer.reason
        else:
            assert answer == RunAgain(RetryOf(1, 1, ended + delay, 1))


@pytest.mark.parametrize("verdict", [Verdict.SUCCEEDED, Verdict.FAILED, Verdict.TIMED_OUT])
def test_the_default_policy_asks_for_a_retry_only_after_a_failure(verdict: Verdict) -> None:
    descriptor = task(retries=1, retry_backoff="1s", retry_backoff_max="1s")
    facts = BodyEnded(verdict, 1, None, None, T0, T0, lost=False, finished=True)
    answer = DEFAULT_POLICY.after_body(Fire.at(descriptor, T0), facts)
    assert isinstance(answer, RunAgain) is (verdict is not Verdict.SUCCEEDED)


class TestEveryNodeComputesTheSameRetry:
    def test_from_the_fire_s_record_alone(self) -> None:
        """The retry a failed record asks for, as another node reads it from the
        history, is the one the node that ran the failure computed."""
        descriptor = task(retries=3, retry_backoff="10s", retry_backoff_max="1m")
        clock, history = Clock(), MemoryRunHistory()
        runner = FireRunner(InMemoryLock(), history=history, clock=clock)
        body = Body(clock, failures=10)
        failed = runner.run(Fire.at(descriptor, T0), body)
        assert failed.retry is not None
        [record] = history.runs(descriptor.target)
        assert pending_retry(descriptor, record) == failed.retry.retry
        clock.now = failed.retry.due
        again = runner.run(failed.retry, body)
        assert again.retry is not None
        [record] = history.runs(descriptor.target)
        assert pending_retry(descriptor, record) == again.retry.retry
        assert again.retry.retry == RetryOf(2, 3, again.retry.due, after_attempt=2)

    def test_none_once_the_retry_started_or_after_the_last(self) -> None:
        descriptor = task(retries=1, retry_backoff="1s", retry_backoff_max="1s")
        clock, history = Clock(), MemoryRunHistory()
        runner = FireRunner(InMemoryLock(), history=history, clock=clock)
        body = Body(clock, failures=10)
        failed = runner.run(Fire.at(descriptor, T0), body)
        assert failed.retry is not None
        clock.now = failed.retry.due
        last = runner.run(failed.retry, body)
        assert (last.verdict, last.retry) == (Verdict.FAILED, None)
        [record] = history.runs(descriptor.target)
        assert record.attempt == 2
        assert pending_retry(descriptor, record) is None

    def test_an_adopted_run_counts_as_an_attempt(self) -> None:
        """A died run adopted by the next fire is attempt 2: its failure asks for retry 2,
        not retry 1 again."""
        descriptor = task(retries=3, retry_backoff="1s", retry_backoff_max="1s")
        facts = BodyEnded(Verdict.FAILED, 2, None, "boom", T0, T0, lost=False, finished=True)
        answer = DEFAULT_POLICY.after_body(Fire.at(descriptor, T0), facts)
        assert isinstance(answer, RunAgain)
        assert (answer.retry.number, answer.retry.after_attempt) == (2, 2)


@pytest.mark.parametrize(
    ("overlap", "skipped"),
    [
        ("skip", True),
        ("cancel_other", True),
        ("buffer_one", False),
        ("buffer_all", False),
        ("allow_all", False),
    ],
)
def test_a_retry_due_after_the_next_fire_follows_the_task_s_overlap(
    overlap: str, skipped: bool
) -> None:
    """`skip` and `cancel_other` let the next fire take over; the others ask for the
    retry, which then meets the next fire's run at the task lock."""
    descriptor = task(
        schedule={"fixed_rate": 1.0},
        overlap=overlap,
        retries=1,
        retry_backoff="1m",
        retry_backoff_max="1m",
    )
    delay = retry_delay(descriptor.target, T0, 1, backoff=60.0, backoff_max=60.0)
    ended = T0 + timedelta(seconds=1)  # the next fire is due at T0 + 1 s: never before
    facts = BodyEnded(Verdict.FAILED, 1, None, "boom", T0, ended, lost=False, finished=True)
    answer = DEFAULT_POLICY.after_body(Fire.at(descriptor, T0), facts)
    if skipped:
        assert isinstance(answer, Skip)
        assert f"(overlap='{overlap}': the next fire takes over)" in answer.reason
    else:
        assert answer == RunAgain(RetryOf(1, 1, ended + delay, 1))
