"""FireRunner on InMemoryLock + the memory history, with movable clocks instead of sleeps."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from firefly_scheduling import current_fire
from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.fires.context import FireContext
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import HistoryError, MemoryRunHistory, RunState
from firefly_scheduling.history.port import RunRecord
from firefly_scheduling.locks import BaseLock, InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


class Clock:
    """A wall clock that moves only when told; `offset` makes a skewed node."""

    def __init__(self, now: datetime = T0, offset: float = 0.0) -> None:
        self.now = now
        self.offset = timedelta(seconds=offset)

    def __call__(self) -> datetime:
        return self.now + self.offset


def task(
    *, lock_ttl: float = 30.0, fixed_rate: float | None = 1.0, fixed_delay: float | None = None
) -> ScheduledDescriptor:
    """A locked task with a unique name (the memory lock's table is process-wide)."""
    target = f"tests.jobs_{uuid.uuid4().hex}:report"
    if fixed_delay is not None:
        fixed_rate = None
    return ScheduledDescriptor(
        target=target,
        lock_name=target,
        lock_ttl=lock_ttl,
        fixed_rate=fixed_rate,
        fixed_delay=fixed_delay,
    )


class Recorder:
    """A body that records the fire context it ran in."""

    def __init__(self, work: Callable[[], object] | None = None) -> None:
        self.seen: list[FireContext] = []
        self._work = work
        self._mutex = threading.Lock()

    def __call__(self) -> None:
        context = current_fire()
        assert context is not None
        with self._mutex:
            self.seen.append(context)
        if self._work is not None:
            self._work()


def runner(
    clock: Clock,
    history: MemoryRunHistory | None,
    node: str,
    *,
    grace: float = 60.0,
    keepalive_interval: float | None = None,
) -> FireRunner:
    return FireRunner(
        InMemoryLock(),
        history=history,
        clock=clock,
        node=node,
        grace=grace,
        keepalive_interval=keepalive_interval,
    )


class TestOneRunPerFire:
    def test_skewed_nodes_run_each_fire_exactly_once(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        clocks = [Clock(offset=offset) for offset in (2.0, 0.0, -2.0)]
        nodes = [runner(clock, history, f"node{i}") for i, clock in enumerate(clocks)]
        body = Recorder()
        for k in range(30):
            instant = T0 + k * SECOND
            for clock in clocks:
                clock.now = instant  # every node wakes at ITS instant: real times differ by 4 s
            # The node whose clock runs ahead wakes first in real time.
            statuses = [node.run(Fire.at(descriptor, instant), body).verdict for node in nodes]
            assert statuses == [Verdict.SUCCEEDED] + [Verdict.CLAIMED_ELSEWHERE] * 2
        assert [context.instant for context in body.seen] == [T0 + k * SECOND for k in range(30)]
        records = history.runs(descriptor.target, limit=100)
        assert len(records) == 30
        assert {(r.state, r.attempt, r.node) for r in records} == {(RunState.SUCCEEDED, 1, "node0")}

    def test_concurrent_nodes_in_threads_run_each_fire_once(self) -> None:
        descriptor = task()
        history = MemoryRunHistory()
        nodes = [runner(Clock(), history, f"node{i}") for i in range(4)]
        body = Recorder()
        for k in range(20):
            barrier = threading.Barrier(len(nodes))
            instant = T0 + k * SECOND

            def fire(
                node: FireRunner,
                instant: datetime = instant,
                barrier: threading.Barrier = barrier,
            ) -> None:
                barrier.wait()
                node.run(Fire.at(descriptor, instant), body)

            threads = [threading.Thread(target=fire, args=(node,)) for node in nodes]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=30)
        assert sorted(context.instant for context in body.seen) == [
            T0 + k * SECOND for k in range(20)
        ]

    def test_a_node_waking_late_within_grace_does_not_run_a_finished_fire_again(self) -> None:
        descriptor = task()
        body = Recorder()
        first = runner(Clock(T0), None, "a")
        assert first.run(Fire.at(descriptor, T0), body).verdict is Verdict.SUCCEEDED
        late = runner(Clock(T0 + 59 * SECOND), None, "b")
        assert late.run(Fire.at(descriptor, T0), body).verdict is Verdict.CLAIMED_ELSEWHERE
        assert len(body.seen) == 1

    def test_a_fire_later_than_grace_is_skipped_and_recorded(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        body = Recorder()
        node = runner(Clock(T0 + 61 * SECOND), history, "late", grace=60)
        assert node.run(Fire.at(descriptor, T0), body).verdict is Verdict.TOO_LATE
        assert body.seen == []
        [record] = history.runs(descriptor.target)
        assert (record.state, record.node) == (RunState.SKIPPED, "late")
        assert record.error is not None
        assert "beyond the grace of 60s" in record.error

    def test_a_skip_by_a_late_node_does_not_stop_an_on_time_one(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        body = Recorder()
        runner(Clock(T0 + 61 * SECOND), history, "late").run(Fire.at(descriptor, T0), body)
        outcome = runner(Clock(T0 + 59 * SECOND), history, "slow-clock").run(
            Fire.at(descriptor, T0), body
        )
        assert outcome.verdict is Verdict.SUCCEEDED
        assert history.runs(descriptor.target)[0].state is RunState.SUCCEEDED

    def test_a_fire_the_history_has_finished_is_not_run_again(self) -> None:
        """E.g. a session backend's claim vanished with its session: the history still knows."""
        history = MemoryRunHistory()
        descriptor = task()
        history.start(descriptor.target, T0, lock=descriptor.target, node="a", token=1, at=T0)
        history.finish(
            descriptor.target,
            T0,
            lock=descriptor.target,
            token=1,
            state=RunState.SUCCEEDED,
            error=None,
            at=T0,
        )
        body = Recorder()
        outcome = runner(Clock(), history, "b").run(Fire.at(descriptor, T0), body)
        assert outcome.verdict is Verdict.ALREADY_RECORDED
        assert body.seen == []

    def test_fixed_delay_fires_take_no_claim(self) -> None:
        descriptor = task(fixed_delay=5.0)
        node = runner(Clock(), None, "a")
        outcome = node.run(Fire.at(descriptor, T0), Recorder())
        assert (outcome.verdict, outcome.claim_seconds) == (Verdict.SUCCEEDED, None)
        assert InMemoryLock().try_acquire(claim_name(descriptor.target, descriptor.target, T0), 1)

    def test_every_outcome_after_a_claim_says_how_long_the_claim_took(self) -> None:
        descriptor = task()
        clock = Clock()
        winner, loser = runner(clock, None, "a"), runner(clock, None, "b")
        won, lost = (
            winner.run(Fire.at(descriptor, T0), Recorder()),
            loser.run(Fire.at(descriptor, T0), Recorder()),
        )
        assert (won.verdict, lost.verdict) == (Verdict.SUCCEEDED, Verdict.CLAIMED_ELSEWHERE)
        assert won.claim_seconds is not None
        assert lost.claim_seconds is not None
        assert won.claim_seconds >= 0
        assert lost.claim_seconds >= 0
        clock.now = T0 + timedelta(hours=1)
        assert loser.run(Fire.at(descriptor, T0), Recorder()).claim_seconds is None, (
            "too late: no claim"
        )


class TestTheTaskLock:
    def test_a_fire_overlapping_a_running_one_is_skipped_and_recorded(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        assert descriptor.lock_name is not None
        previous = InMemoryLock()
        assert previous.try_acquire(descriptor.lock_name, 30)  # the previous fire still runs
        body = Recorder()
        outcome = runner(Clock(), history, "a").run(Fire.at(descriptor, T0), body)
        assert outcome.verdict is Verdict.OVERLAPPING
        assert body.seen == []
        assert history.runs(descriptor.target)[0].state is RunState.SKIPPED
        # The claim is kept: no other node picks the skipped fire up.
        other = runner(Clock(), history, "b")
        assert other.run(Fire.at(descriptor, T0), body).verdict is Verdict.CLAIMED_ELSEWHERE
        previous.release(descriptor.lock_name)

    def test_the_body_gets_its_fire_and_a_growing_token(self) -> None:
        descriptor = task()
        body = Recorder()
        node = runner(Clock(), None, "me")
        for k in range(3):
            node.run(Fire.at(descriptor, T0 + k * SECOND), body)
        assert current_fire() is None
        first = body.seen[0]
        assert (first.target, first.instant, first.attempt, first.node) == (
            descriptor.target,
            T0,
            1,
            "me",
        )
        assert (first.lock_name, first.lost) == (descriptor.lock_name, False)
        tokens = [context.token for context in body.seen]
        assert all(isinstance(token, int) for token in tokens)
        assert tokens == sorted(set(tokens))  # type: ignore[type-var]

    def test_a_failing_body_is_recorded_and_its_lock_released(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        assert descriptor.lock_name is not None

        def broken() -> None:
            raise ValueError("disk full")

        outcome = runner(Clock(), history, "a").run(Fire.at(descriptor, T0), broken)
        assert (outcome.verdict, outcome.error) == (Verdict.FAILED, "ValueError: disk full")
        assert history.runs(descriptor.target)[0].state is RunState.FAILED
        assert descriptor.target in caplog.text
        assert InMemoryLock().try_acquire(descriptor.lock_name, 1)

    def test_an_interrupt_propagates_after_the_fire_is_recorded_and_the_lock_released(
        self,
    ) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        assert descriptor.lock_name is not None

        def interrupted() -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            runner(Clock(), history, "a").run(Fire.at(descriptor, T0), interrupted)
        [record] = history.runs(descriptor.target)
        assert record.state is RunState.FAILED
        assert record.error is not None
        assert "interrupted" in record.error
        assert InMemoryLock().try_acquire(descriptor.lock_name, 1)

    def test_a_backend_failure_skips_the_fire_and_never_runs_it_unlocked(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        class DownLock(BaseLock):
            backend_name = "down"

            def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
                raise OSError("connection refused")

            def _release(self, name: str, owner: str) -> bool:
                return False

        history = MemoryRunHistory()
        descriptor = task()
        body = Recorder()
        node = FireRunner(DownLock(), history=history, clock=Clock(), node="a")
        outcome = node.run(Fire.at(descriptor, T0), body)
        assert outcome.verdict is Verdict.BACKEND_ERROR
        assert body.seen == []
        assert "connection refused" in caplog.text
        assert history.runs(descriptor.target)[0].state is RunState.SKIPPED

    def test_an_unlocked_task_runs_on_every_node_unrecorded(self) -> None:
        history = MemoryRunHistory()
        descriptor = ScheduledDescriptor(target="tests.jobs:free", fixed_rate=1.0)
        body = Recorder()
        for node in ("a", "b"):
            assert runner(Clock(), history, node).run(Fire.at(descriptor, T0), body).ran
        assert [(c.token, c.attempt, c.lock_name) for c in body.seen] == [(None, 1, None)] * 2
        assert history.runs() == []

    def test_an_unavailable_history_never_stops_a_run(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        class DownHistory(MemoryRunHistory):
            def start(self, *args: object, **kwargs: object) -> int | None:
                raise HistoryError("history database down")

            def finish(self, *args: object, **kwargs: object) -> bool:
                raise HistoryError("history database down")

            def unfinished(self, task: str, *, lock: str) -> list[RunRecord]:
                raise HistoryError("history database down")

        body = Recorder()
        outcome = FireRunner(InMemoryLock(), history=DownHistory(), clock=Clock()).run(
            Fire.at(task(), T0), body
        )
        assert outcome.verdict is Verdict.SUCCEEDED
        assert len(body.seen) == 1
        assert "history database down" in caplog.text

    @pytest.mark.parametrize(("grace", "clock_skew"), [(0, 5), (-1, 5), (60, -1)])
    def test_nonsense_windows_are_refused(self, grace: float, clock_skew: float) -> None:
        with pytest.raises(ValueError):
            FireRunner(InMemoryLock(), grace=grace, clock_skew=clock_skew)


class DeadNode:
    """What a node killed mid-body leaves behind: a claim, a running record, a lapsing lease."""

    def __init__(self, descriptor: ScheduledDescriptor, history: MemoryRunHistory) -> None:
        assert descriptor.lock_name is not None
        lock = InMemoryLock()
        assert lock.try_acquire(claim_name(descriptor.target, descriptor.lock_name, T0), 65)
        token = lock.try_acquire_fenced(descriptor.lock_name, 0.05)
        assert token is not None
        self.token = token
        assert (
            history.start(
                descriptor.target, T0, lock=descriptor.target, node="dead", token=token, at=T0
            )
            == 1
        )
        time.sleep(0.1)  # its lease lapses: nobody renews it


class TestAdoption:
    def test_a_died_run_is_adopted_within_grace_as_attempt_two(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        dead = DeadNode(descriptor, history)
        body = Recorder()
        survivor = runner(Clock(T0 + 31 * SECOND), history, "survivor")
        outcome = survivor.run(Fire.at(descriptor, T0 + 31 * SECOND), body)
        assert outcome.verdict is Verdict.SUCCEEDED
        [adopted] = outcome.adopted
        assert (adopted.verdict, adopted.instant, adopted.attempt) == (
            Verdict.SUCCEEDED,
            T0,
            2,
        )
        assert adopted.token is not None
        assert adopted.token > dead.token
        assert [(c.instant, c.attempt) for c in body.seen] == [(T0, 2), (T0 + 31 * SECOND, 1)]
        record = history.runs(descriptor.target)[-1]
        assert (record.instant, record.state, record.node, record.attempt) == (
            T0,
            RunState.SUCCEEDED,
            "survivor",
            2,
        )

    def test_an_adopted_run_and_the_fire_that_adopted_it_share_one_holding_and_token(
        self,
    ) -> None:
        """The documented order: a token orders holdings; runs under one holding
        (the adoption, then the fire) share it and run one after the other, so a
        resource stamped with tokens must refuse only an OLDER token, not an equal one."""
        history = MemoryRunHistory()
        descriptor = task()
        dead = DeadNode(descriptor, history)
        ran: list[tuple[int, float, float]] = []

        def body() -> None:
            context = current_fire()
            assert context is not None
            assert context.token is not None
            started = time.monotonic()
            time.sleep(0.01)
            ran.append((context.token, started, time.monotonic()))

        survivor = runner(Clock(T0 + 31 * SECOND), history, "survivor")
        outcome = survivor.run(Fire.at(descriptor, T0 + 31 * SECOND), body)
        [adopted] = outcome.adopted
        assert adopted.token == outcome.token
        [(adopted_token, _, adopted_end), (fire_token, fire_start, _)] = ran
        assert adopted_token == fire_token > dead.token
        assert adopted_end <= fire_start  # never concurrent: one after the other
        later = survivor.run(Fire.at(descriptor, T0 + 32 * SECOND), body)
        assert later.token is not None
        assert later.token > fire_token  # the next holding orders after both

    def test_an_adoption_whose_start_cannot_be_recorded_still_counts_as_attempt_two(
        self,
    ) -> None:
        """Found by benchmarks/chaos.py: the body of an adopted run was told attempt 1."""

        class StartFails(MemoryRunHistory):
            def start(self, *args: object, **kwargs: object) -> int | None:
                raise HistoryError("history write failed (injected)")

        history = StartFails()
        descriptor = task()
        assert (
            MemoryRunHistory.start(
                history,
                descriptor.target,
                T0,
                lock=descriptor.lock_name or descriptor.target,
                node="dead",
                token=1,
                at=T0,
            )
            == 1
        )
        body = Recorder()
        survivor = runner(Clock(T0 + 31 * SECOND), history, "survivor")
        outcome = survivor.run(Fire.at(descriptor, T0 + 31 * SECOND), body)
        [adopted] = outcome.adopted
        assert (adopted.verdict, adopted.instant, adopted.attempt) == (
            Verdict.SUCCEEDED,
            T0,
            2,
        )
        assert [(c.instant, c.attempt) for c in body.seen] == [(T0, 2), (T0 + 31 * SECOND, 1)]

    def test_a_died_run_found_after_grace_is_expired_not_adopted(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        DeadNode(descriptor, history)
        body = Recorder()
        now = T0 + 90 * SECOND
        outcome = runner(Clock(now), history, "survivor", grace=60).run(
            Fire.at(descriptor, now), body
        )
        assert outcome.verdict is Verdict.SUCCEEDED
        assert [(o.verdict, o.instant) for o in outcome.adopted] == [(Verdict.EXPIRED, T0)]
        assert [c.instant for c in body.seen] == [now]
        old = history.runs(descriptor.target)[-1]
        assert (old.instant, old.state) == (T0, RunState.EXPIRED)

    def test_a_zombie_waking_after_adoption_is_fenced(self) -> None:
        """SIGSTOP: the holder stops renewing, its lease lapses, another node adopts."""
        history = MemoryRunHistory()
        descriptor = task(lock_ttl=0.2)
        resume = threading.Event()
        zombie_body = Recorder(lambda: resume.wait(10))
        # Renewals 100 s apart: the stopped process renews nothing while stopped.
        zombie = runner(Clock(), history, "zombie", keepalive_interval=100)
        outcomes = []
        thread = threading.Thread(
            target=lambda: outcomes.append(zombie.run(Fire.at(descriptor, T0), zombie_body))
        )
        thread.start()
        deadline = time.monotonic() + 5
        while not zombie_body.seen and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # past the zombie's 0.2 s lease
        adopter_body = Recorder()
        adopter = runner(Clock(T0 + SECOND), history, "adopter")
        outcome = adopter.run(Fire.at(descriptor, T0 + SECOND), adopter_body)
        assert [(o.instant, o.attempt, o.verdict) for o in outcome.adopted] == [
            (T0, 2, Verdict.SUCCEEDED)
        ]
        resume.set()
        thread.join(timeout=10)
        [late] = outcomes
        assert (late.verdict, late.fenced) == (Verdict.SUCCEEDED, True)
        assert late.token is not None
        assert outcome.adopted[0].token is not None
        assert late.token < outcome.adopted[0].token
        record = history.runs(descriptor.target)[-1]
        assert (record.instant, record.state, record.node, record.attempt) == (
            T0,
            RunState.SUCCEEDED,
            "adopter",
            2,
        )


class RenewalFails(InMemoryLock):
    """A lock whose server stops answering renewals (a partition, a failover)."""

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return False


class TestKeepAlive:
    def test_a_long_body_keeps_its_lease_and_no_other_node_starts(self) -> None:
        descriptor = task(lock_ttl=0.3)
        history = MemoryRunHistory()
        done = threading.Event()
        long_body = Recorder(lambda: time.sleep(0.9))  # three times the lease
        holder = runner(Clock(), history, "holder")

        def hold_long() -> None:
            holder.run(Fire.at(descriptor, T0), long_body)
            done.set()

        thread = threading.Thread(target=hold_long)
        thread.start()
        others = runner(Clock(), history, "other")
        attempts = 0
        while not done.wait(0.05):
            attempts += 1
            instant = T0 + attempts * SECOND
            status = others.run(Fire.at(descriptor, instant), Recorder()).verdict
            assert status is Verdict.OVERLAPPING
        thread.join(timeout=10)
        assert attempts >= 10
        later = Recorder()
        others.run(Fire.at(descriptor, T0 + 100 * SECOND), later)
        [first], [after] = long_body.seen, later.seen
        assert not first.lost
        assert first.token is not None
        assert after.token is not None
        assert after.token > first.token

    def test_a_failed_renewal_is_visible_to_the_body(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        descriptor = task(lock_ttl=0.3)
        observed: list[bool] = []

        def watchful() -> None:
            context = current_fire()
            assert context is not None
            deadline = time.monotonic() + 5
            while not context.lost and time.monotonic() < deadline:
                time.sleep(0.01)
            observed.append(context.lost)

        node = FireRunner(RenewalFails(), clock=Clock(), node="a")
        outcome = node.run(Fire.at(descriptor, T0), watchful)
        assert observed == [True]
        assert outcome.lost
        assert "is lost while the body runs" in caplog.text

    def test_a_lock_lost_during_an_adoption_stops_the_fire_after_it(self) -> None:
        history = MemoryRunHistory()
        descriptor = task(lock_ttl=0.3)
        DeadNode(descriptor, history)

        def until_lost() -> None:
            context = current_fire()
            assert context is not None
            deadline = time.monotonic() + 5
            while not context.lost and time.monotonic() < deadline:
                time.sleep(0.01)

        body = Recorder(until_lost)
        now = T0 + 10 * SECOND
        node = FireRunner(RenewalFails(), history=history, clock=Clock(now), node="a")
        outcome = node.run(Fire.at(descriptor, now), body)
        assert outcome.verdict is Verdict.LOCK_LOST
        assert [c.instant for c in body.seen] == [T0]
        assert outcome.adopted[0].lost
