"""FireRunner runs each fire once across skewed nodes, and its task lock keeps fires apart.

On InMemoryLock + the memory history, with movable clocks instead of sleeps.
"""

from __future__ import annotations

import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from firefly_scheduling import current_fire
from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import HistoryError, MemoryRunHistory, RunState
from firefly_scheduling.history.port import RunRecord
from firefly_scheduling.locks import BaseLock, InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
from firefly_fire_runner_scene import SECOND, T0, Clock, Recorder, runner, task


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
