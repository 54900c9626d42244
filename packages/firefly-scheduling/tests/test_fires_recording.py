"""The record stage (`fires.recording`): every run that ran is recorded, with its real
outcome; `fenced` only when a newer attempt owns the record; the task lock is kept
until the end of a run is written or its fire can no longer be adopted.

Each defect case failed on the code before: a run whose `start` failed was never
recorded and reported `fenced`, and its remembered end was "recorded now" by a
refused `finish` that wrote nothing.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from firefly_scheduling.fires import recording
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import HistoryError, MemoryRunHistory, RunState
from firefly_scheduling.history.port import Recorded
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def task() -> ScheduledDescriptor:
    target = f"tests.recording_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=target, lock_name=target, lock_ttl=30.0, fixed_rate=1.0)


class Flaky(MemoryRunHistory):
    """The memory history whose named writes raise while they are in `down`."""

    def __init__(self, *down: str) -> None:
        super().__init__()
        self.down = set(down)

    def _check(self, write: str) -> None:
        if write in self.down:
            raise HistoryError(f"the history is unreachable (injected into {write})")

    def start(self, task: str, instant: datetime, **kwargs: Any) -> int | None:
        self._check("start")
        return super().start(task, instant, **kwargs)

    def finish(self, task: str, instant: datetime, **kwargs: Any) -> bool:
        self._check("finish")
        return super().finish(task, instant, **kwargs)

    def record_run(self, task: str, instant: datetime, **kwargs: Any) -> Recorded:
        self._check("record_run")
        return super().record_run(task, instant, **kwargs)


class TestAStartThatFailed:
    def test_the_run_is_recorded_whole_when_it_ends_and_is_not_fenced(self) -> None:
        history = Flaky("start")
        descriptor = task()
        runner = FireRunner(InMemoryLock(), history=history, clock=lambda: T0, node="n1")
        outcome = runner.run(Fire.at(descriptor, T0), lambda: None)
        assert outcome.verdict is Verdict.SUCCEEDED
        assert outcome.fenced is False
        [record] = history.runs(descriptor.target)
        assert (record.node, record.attempt, record.state, record.token) == (
            "n1",
            1,
            RunState.SUCCEEDED,
            outcome.token,
        )
        assert record.started_at == T0
        assert record.ended_at == T0

    def test_a_failed_body_is_recorded_as_failed(self) -> None:
        history = Flaky("start")
        descriptor = task()

        def body() -> None:
            raise ValueError("no")

        outcome = FireRunner(InMemoryLock(), history=history, clock=lambda: T0).run(
            Fire.at(descriptor, T0), body
        )
        assert outcome.verdict is Verdict.FAILED
        [record] = history.runs(descriptor.target)
        assert (record.state, record.error) == (RunState.FAILED, "ValueError: no")

    def test_the_run_replaces_the_skip_a_late_node_wrote(self) -> None:
        history = Flaky("start")
        descriptor = task()
        assert history.skip(
            descriptor.target, T0, lock=descriptor.target, node="late", reason="late", at=T0
        )
        FireRunner(InMemoryLock(), history=history, clock=lambda: T0, node="n1").run(
            Fire.at(descriptor, T0), lambda: None
        )
        [record] = history.runs(descriptor.target)
        assert (record.node, record.state) == ("n1", RunState.SUCCEEDED)

    def test_its_remembered_end_is_written_whole_once_the_history_is_back(
        self, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="firefly_scheduling")
        monkeypatch.setattr(recording, "FINISH_RETRY_SECONDS", 0.1)
        history = Flaky("start", "finish", "record_run")
        descriptor = task()
        now = [T0]
        runner = FireRunner(
            InMemoryLock(), history=history, clock=lambda: now[0], grace=0.2, clock_skew=0
        )
        runner.run(Fire.at(descriptor, T0), lambda: None)
        assert history.runs(descriptor.target) == []
        history.down.clear()
        now[0] = T0 + SECOND
        runner.run(Fire.at(descriptor, T0 + SECOND), lambda: None)
        states = {r.instant: (r.state, r.attempt) for r in history.runs(descriptor.target)}
        assert states == {
            T0: (RunState.SUCCEEDED, 1),
            T0 + SECOND: (RunState.SUCCEEDED, 1),
        }
        assert "its run (succeeded) is recorded now" in caplog.text
        assert "refused" not in caplog.text


class TestFenced:
    def test_fenced_when_a_newer_attempt_owns_the_record(self) -> None:
        history = MemoryRunHistory()
        descriptor = task()
        lock = descriptor.target

        def taken_over() -> None:  # another node adopts the fire while this body runs
            history.start(descriptor.target, T0, lock=lock, node="adopter", token=10**9, at=T0)

        outcome = FireRunner(InMemoryLock(), history=history, clock=lambda: T0).run(
            Fire.at(descriptor, T0), taken_over
        )
        assert outcome.fenced is True
        [record] = history.runs(descriptor.target)
        assert (record.node, record.state) == ("adopter", RunState.RUNNING)

    def test_not_fenced_when_its_own_finish_was_written_and_only_the_reply_lost(self) -> None:
        class ReplyLost(MemoryRunHistory):
            """Writes the first finish, then fails as if its reply never came."""

            lost = 0

            def finish(self, task: str, instant: datetime, **kwargs: Any) -> bool:
                written = super().finish(task, instant, **kwargs)
                if not self.lost:
                    self.lost += 1
                    raise HistoryError("connection lost before the reply (injected)")
                return written

        history = ReplyLost()
        descriptor = task()
        outcome = FireRunner(InMemoryLock(), history=history, clock=lambda: T0).run(
            Fire.at(descriptor, T0), lambda: None
        )
        assert history.lost == 1
        assert outcome.fenced is False
        assert history.runs(descriptor.target)[0].state is RunState.SUCCEEDED


class TestTheTaskLockIsKeptUntilTheEndIsWritten:
    def test_a_finish_failing_past_the_retry_window_keeps_the_lock_until_it_is_written(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """While the finish fails, no other node can take the task lock (and adopt)."""
        monkeypatch.setattr(recording, "FINISH_RETRY_SECONDS", 0.1)
        history = Flaky("finish")
        descriptor = task()
        lock_name = descriptor.target
        held_meanwhile: list[bool] = []

        def history_back_later() -> None:
            time.sleep(0.8)  # eight retry windows
            held_meanwhile.append(not InMemoryLock().try_acquire(lock_name, 30))
            history.down.clear()

        outage = threading.Thread(target=history_back_later)
        runner = FireRunner(InMemoryLock(), history=history, clock=lambda: T0)
        outage.start()
        outcome = runner.run(Fire.at(descriptor, T0), lambda: None)
        outage.join()
        assert held_meanwhile == [True], "the task lock was released before the end was written"
        assert outcome.fenced is False
        assert history.runs(descriptor.target)[0].state is RunState.SUCCEEDED
        assert InMemoryLock().try_acquire(lock_name, 30), "the lock was not released after"

    def test_an_interrupted_body_is_retried_for_the_short_window_only(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Its fire did not finish: nothing to protect from adoption, no minute of waiting."""
        monkeypatch.setattr(recording, "FINISH_RETRY_SECONDS", 0.2)
        history = Flaky("finish")
        descriptor = task()

        def interrupted() -> None:
            raise KeyboardInterrupt

        runner = FireRunner(InMemoryLock(), history=history, clock=lambda: T0)
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            runner.run(Fire.at(descriptor, T0), interrupted)
        assert time.monotonic() - began < 5, "it waited for grace + clock skew"
        assert InMemoryLock().try_acquire(descriptor.target, 30), "the lock was not released"
