"""Faults inside one node: a failed history write, a stall before the body,
a stuck renewal, an ever-growing memory table. Each case failed on the code before."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from firefly_scheduling.fires import recording, unrecorded
from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import HistoryError, MemoryRunHistory, RunState
from firefly_scheduling.locks import BaseLock, InMemoryLock
from firefly_scheduling.locks.keepalive import KeepAlive, Renewer
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def task(lock_ttl: float = 30.0) -> ScheduledDescriptor:
    target = f"tests.faults_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=target, lock_name=target, lock_ttl=lock_ttl, fixed_rate=1.0)


class FailingFinishes(MemoryRunHistory):
    """The memory history whose next `failures` calls of `finish` raise."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def finish(self, task: str, instant: datetime, **kwargs: Any) -> bool:
        if self.failures > 0:
            self.failures -= 1
            raise HistoryError("the history is unreachable (injected)")
        return super().finish(task, instant, **kwargs)


class TestFailedFinish:
    def test_a_finish_that_fails_once_is_retried_and_nothing_runs_twice(self) -> None:
        """finish raised once, and the next fire adopted the succeeded fire."""
        history = FailingFinishes(failures=1)
        now = [T0]
        runner = FireRunner(InMemoryLock(), history=history, clock=lambda: now[0])
        descriptor = task()
        runs: list[datetime] = []
        for instant in (T0, T0 + SECOND):
            now[0] = instant
            runner.run(Fire.at(descriptor, instant), lambda at=instant: runs.append(at))
        assert runs == [T0, T0 + SECOND]
        states = {record.instant: record.state for record in history.runs(descriptor.target)}
        assert states == {T0: RunState.SUCCEEDED, T0 + SECOND: RunState.SUCCEEDED}

    def test_a_finish_that_keeps_failing_is_remembered_and_never_adopted_here(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Past `grace + clock_skew` (half a second here) no node adopts the fire: the
        end is remembered then, and the task lock released."""
        monkeypatch.setattr(recording, "FINISH_RETRY_SECONDS", 0.2)
        history = FailingFinishes(failures=10**6)
        now = [T0]
        runner = FireRunner(
            InMemoryLock(), history=history, clock=lambda: now[0], grace=0.5, clock_skew=0
        )
        descriptor = task()
        runs: list[datetime] = []
        now[0] = T0
        runner.run(Fire.at(descriptor, T0), lambda: runs.append(T0))
        assert [r.state for r in history.unfinished(descriptor.target, lock=descriptor.target)] == [
            RunState.RUNNING
        ]
        history.failures = 0  # the history is back
        now[0] = T0 + SECOND
        outcome = runner.run(Fire.at(descriptor, T0 + SECOND), lambda: runs.append(T0 + SECOND))
        assert outcome.adopted == (), "a fire this node finished was adopted"
        assert runs == [T0, T0 + SECOND]
        states = {record.instant: record.state for record in history.runs(descriptor.target)}
        assert states[T0] is RunState.SUCCEEDED, "the remembered finish was written later"


class FailingSkips(MemoryRunHistory):
    """The memory history whose `skip` writes raise while `down` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    def skip(self, task: str, instant: datetime, **kwargs: Any) -> bool:
        if self.down:
            raise HistoryError("the history is unreachable (injected)")
        return super().skip(task, instant, **kwargs)


class TestFailedSkip:
    """Found by `benchmarks/chaos.py` (seed 20261203, postgres): a history outage made
    a node's passed-over record fail, the rest of the batch was dropped unwritten,
    and one fire ended neither run nor recorded."""

    def test_passed_over_fires_a_failing_history_refused_are_written_once_it_is_back(
        self,
    ) -> None:
        history = FailingSkips()
        now = [T0 + 3 * SECOND]
        runner = FireRunner(InMemoryLock(), history=history, clock=lambda: now[0])
        descriptor = task()
        passed_over = [Fire.at(descriptor, T0 + i * SECOND) for i in range(3)]
        assert runner.record_passed_over(passed_over, "passed over (test)") == 0
        history.down = False
        runner.run(Fire.at(descriptor, T0 + 3 * SECOND), lambda: None)
        states = {record.instant: record.state for record in history.runs(descriptor.target)}
        assert states == {
            T0: RunState.SKIPPED,
            T0 + SECOND: RunState.SKIPPED,
            T0 + 2 * SECOND: RunState.SKIPPED,
            T0 + 3 * SECOND: RunState.SUCCEEDED,
        }

    def test_a_skip_that_keeps_failing_is_written_before_a_later_fire(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(recording, "SKIP_RETRY_SECONDS", 0.1)
        history = FailingSkips()
        lock = InMemoryLock()
        descriptor = task()
        assert lock.try_acquire(descriptor.target, 30)  # the previous fire still runs
        runner = FireRunner(lock, history=history, clock=lambda: T0)
        outcome = runner.run(Fire.at(descriptor, T0), lambda: None)
        assert outcome.verdict is Verdict.OVERLAPPING
        lock.release(descriptor.target)
        history.down = False
        runner.run(Fire.at(descriptor, T0 + SECOND), lambda: None)
        states = {record.instant: record.state for record in history.runs(descriptor.target)}
        assert states == {T0: RunState.SKIPPED, T0 + SECOND: RunState.SUCCEEDED}

    def test_the_memory_keeps_the_newest_writes_and_logs_the_ones_it_drops(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        monkeypatch.setattr(unrecorded, "MAX_REMEMBERED", 5)
        history = FailingSkips()
        runner = FireRunner(InMemoryLock(), history=history, clock=lambda: T0 + 9 * SECOND)
        descriptor = task()
        runner.record_passed_over([Fire.at(descriptor, T0 + i * SECOND) for i in range(8)], "test")
        assert "is forgotten unrecorded" in caplog.text
        history.down = False
        runner.close()
        kept = sorted(record.instant for record in history.runs(descriptor.target))
        assert kept == [T0 + i * SECOND for i in range(3, 8)]

    def test_unwritten_skips_are_written_at_close(self) -> None:
        history = FailingSkips()
        runner = FireRunner(InMemoryLock(), history=history, clock=lambda: T0 + SECOND)
        descriptor = task()
        runner.record_passed_over([Fire.at(descriptor, T0)], "passed over (test)")
        history.down = False
        runner.close()
        [record] = history.runs(descriptor.target)
        assert (record.instant, record.state) == (T0, RunState.SKIPPED)


class NoRenewal(InMemoryLock):
    """The memory lock without the renewal capability: nothing keeps a lease alive."""

    renewable = False


class SlowRenewalReply(InMemoryLock):
    """A lock whose renewals reach the server at once and whose replies come 1.2 s late."""

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        renewed = super()._renew(name, owner, ttl_seconds)
        time.sleep(1.2)
        return renewed


class TestLeaseCheckedBeforeTheBody:
    def test_a_stall_past_the_lease_before_the_body_skips_the_fire(self) -> None:
        """a pause longer than lock_ttl before the body went unnoticed."""
        history = MemoryRunHistory()
        stall = threading.Event()
        original_start = history.start

        def slow_start(*args: object, **kwargs: object) -> int | None:
            time.sleep(0.4)  # the node stalls between the lock and the body
            stall.set()
            return original_start(*args, **kwargs)  # type: ignore[arg-type]

        history.start = slow_start  # type: ignore[method-assign]
        runner = FireRunner(NoRenewal(), history=history, clock=lambda: T0)
        ran: list[str] = []
        outcome = runner.run(Fire.at(task(lock_ttl=0.2), T0), lambda: ran.append("ran"))
        assert stall.is_set()
        assert ran == [], "the body ran on a lapsed lease"
        assert outcome.verdict is Verdict.LOCK_LOST

    def test_a_stall_the_keep_alive_missed_skips_the_fire_and_closes_its_record(self) -> None:
        """A renewable lease whose keep-alive had not run yet: the server freed it too."""
        history = MemoryRunHistory()
        original_start = history.start

        def slow_start(*args: object, **kwargs: object) -> int | None:
            time.sleep(0.4)
            return original_start(*args, **kwargs)  # type: ignore[arg-type]

        history.start = slow_start  # type: ignore[method-assign]
        runner = FireRunner(
            InMemoryLock(), history=history, clock=lambda: T0, keepalive_interval=60
        )
        descriptor = task(lock_ttl=0.2)
        ran: list[str] = []
        outcome = runner.run(Fire.at(descriptor, T0), lambda: ran.append("ran"))
        assert ran == []
        assert outcome.verdict is Verdict.LOCK_LOST
        [record] = history.runs(descriptor.target)
        assert record.state is RunState.EXPIRED
        assert record.error is not None
        assert "before the body started" in record.error

    def test_a_renewal_whose_reply_came_after_the_lease_lapsed_skips_the_fire(self) -> None:
        """Found by the chaos checker's CI lane (seed 8, redis, a proxy delaying replies):
        the pre-body renewal reached the server in time, its reply came back after the
        lease had run out there, and the body ran on it; another node had meanwhile
        taken the lapsed lock, adopted the fire and run it. A renewal vouches for the
        lease from when it was sent: the body needs its margin left after the reply."""
        history = MemoryRunHistory()
        original_start = history.start

        def slow_start(*args: object, **kwargs: object) -> int | None:
            time.sleep(0.6)  # less than half of the 1 s lease left: the check renews
            return original_start(*args, **kwargs)  # type: ignore[arg-type]

        history.start = slow_start  # type: ignore[method-assign]
        runner = FireRunner(
            SlowRenewalReply(), history=history, clock=lambda: T0, keepalive_interval=60
        )
        ran: list[str] = []
        outcome = runner.run(Fire.at(task(lock_ttl=1.0), T0), lambda: ran.append("ran"))
        assert ran == [], "the body ran on a lease that lapsed before the renewal's reply"
        assert outcome.verdict is Verdict.LOCK_LOST

    def test_a_lease_that_did_not_lapse_runs_the_body(self) -> None:
        runner = FireRunner(NoRenewal(), history=MemoryRunHistory(), clock=lambda: T0)
        ran: list[str] = []
        outcome = runner.run(Fire.at(task(lock_ttl=5), T0), lambda: ran.append("ran"))
        assert ran == ["ran"]
        assert outcome.verdict is Verdict.SUCCEEDED
        assert not outcome.lost

    def test_a_body_that_outlives_an_unrenewed_lease_is_reported_lost(self) -> None:
        runner = FireRunner(NoRenewal(), clock=lambda: T0)
        outcome = runner.run(Fire.at(task(lock_ttl=0.1), T0), lambda: time.sleep(0.3))
        assert outcome.verdict is Verdict.SUCCEEDED
        assert outcome.lost, "another node could have run while this body outlived its lease"


class StuckRenewal(InMemoryLock):
    """A lock whose renewals hang until released: a dead connection without a timeout."""

    unstuck = threading.Event()

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        self.unstuck.wait(30)
        return super()._renew(name, owner, ttl_seconds)


def test_stopping_a_keep_alive_never_waits_forever_for_a_stuck_renewal() -> None:
    """`KeepAlive.stop()` joined its thread without a timeout."""
    lock = StuckRenewal()
    holding = lock.acquire(f"stuck-{uuid.uuid4()}", 30)
    assert holding is not None
    keepalive = KeepAlive(lock, holding, 30, interval=0.05).start(Renewer())
    time.sleep(0.2)  # a renewal is now stuck
    began = time.monotonic()
    keepalive.stop(timeout=0.3)
    assert time.monotonic() - began < 5
    StuckRenewal.unstuck.set()
    lock.release_holding(holding)


def test_the_memory_lock_purges_expired_claims() -> None:
    """5,000 fires left 5,000 entries in the memory lock's table."""
    lock = InMemoryLock()
    before = InMemoryLock.entries()
    target = f"tests.faults_{uuid.uuid4().hex}:job"
    for second in range(5000):
        name = claim_name(target, target, T0 + second * SECOND)
        assert lock.try_claim(name, 0.01)
    time.sleep(1.1)
    assert lock.try_claim(claim_name(target, target, T0 - SECOND), 0.01)  # purges when due
    assert InMemoryLock.entries() <= before + 1


def test_a_backend_without_renewal_declares_none() -> None:
    class Plain(BaseLock):
        def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
            return True

        def _release(self, name: str, owner: str) -> bool:
            return True

    assert Plain().capabilities.renewable is False
    assert NoRenewal().capabilities.renewable is False
    assert InMemoryLock().capabilities.renewable is True


class SessionEndsUnseen(InMemoryLock):
    """A session backend whose session ended while the body ran, found out at the release."""

    def release_holding(self, holding: object) -> None:
        holding.lost = True  # type: ignore[attr-defined]  # what the session layer does
        super().release_holding(holding)  # type: ignore[arg-type]


def test_a_lock_found_lost_at_the_release_reports_the_run_lost() -> None:
    """Found by benchmarks/chaos.py on PostgreSQL: a node SIGSTOPped inside a 1 ms body
    while its session was killed finished the body before any check ran; another node
    had meanwhile taken the lock, yet the run was reported not lost."""
    descriptor = task()
    outcome = FireRunner(SessionEndsUnseen(), history=MemoryRunHistory()).run(
        Fire.at(descriptor, datetime.now(UTC)), lambda: None
    )
    assert outcome.verdict is Verdict.SUCCEEDED
    assert outcome.lost
