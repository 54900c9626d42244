"""The `record_run` part of the run-history contract (`RunHistoryContract` includes it).

`record_run` writes the whole record of a run that ended when its `start` went
unrecorded or its `finish` was refused: it must leave the record with the newest
attempt that ran, under the same fencing rules as `start` and `finish`, and say
whose the record is when it writes nothing.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from firefly_scheduling.history.base import LATE_END_NOTE
from firefly_scheduling.history.port import MAX_ERROR_LENGTH, Recorded, RunHistory, RunState

T0 = datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
SECOND = timedelta(seconds=1)
TASK = "app.jobs:report"
#: The task lock's name: with the task and the instant, a record's key.
LOCK = "production:app.jobs:report"
OTHER_LOCK = "staging:app.jobs:report"


def _record_run(
    history: RunHistory,
    *,
    node: str = "a",
    token: int | None = 7,
    state: RunState = RunState.SUCCEEDED,
    error: str | None = None,
    lock: str = LOCK,
    instant: datetime = T0,
) -> Recorded:
    """`record_run` of a run of TASK that started 1 s after the instant and took 2 s."""
    return history.record_run(
        TASK,
        instant,
        lock=lock,
        node=node,
        token=token,
        state=state,
        error=error,
        started_at=instant + SECOND,
        ended_at=instant + 3 * SECOND,
    )


def _finished(history: RunHistory, token: int | None, state: RunState = RunState.FAILED) -> None:
    assert history.start(TASK, T0, lock=LOCK, node="first", token=token, at=T0) == 1
    assert history.finish(TASK, T0, lock=LOCK, token=token, state=state, error="e", at=T0)


class RecordRunContract:
    """Cases of `RunHistory.record_run` every store must pass."""

    def test_a_run_with_no_record_is_written_whole(self, history: RunHistory) -> None:
        assert _record_run(history, error="ValueError: no", state=RunState.FAILED) is (
            Recorded.WRITTEN
        )
        [record] = history.runs(TASK)
        assert (record.lock, record.task, record.instant, record.node) == (LOCK, TASK, T0, "a")
        assert (record.attempt, record.state, record.token) == (1, RunState.FAILED, 7)
        assert (record.started_at, record.ended_at) == (T0 + SECOND, T0 + 3 * SECOND)
        assert record.error == "ValueError: no"
        assert history.unfinished(TASK, lock=LOCK) == []

    def test_a_skip_is_replaced_by_the_run(self, history: RunHistory) -> None:
        assert history.skip(TASK, T0, lock=LOCK, node="late", reason="3s late", at=T0)
        assert _record_run(history) is Recorded.WRITTEN
        [record] = history.runs(TASK)
        assert (record.node, record.attempt, record.state, record.error) == (
            "a",
            1,
            RunState.SUCCEEDED,
            None,
        )
        assert record.started_at == T0 + SECOND

    def test_its_own_running_record_is_closed(self, history: RunHistory) -> None:
        """The start was written after all; only its reply was lost."""
        assert history.start(TASK, T0, lock=LOCK, node="a", token=7, at=T0) == 1
        assert _record_run(history) is Recorded.WRITTEN
        [record] = history.runs(TASK)
        assert (record.attempt, record.state, record.token) == (1, RunState.SUCCEEDED, 7)
        assert record.ended_at == T0 + 3 * SECOND

    def test_an_older_running_record_is_taken_over_as_the_next_attempt(
        self, history: RunHistory
    ) -> None:
        """An adoption whose start went unrecorded: the died run's record is still there."""
        assert history.start(TASK, T0, lock=LOCK, node="dead", token=3, at=T0) == 1
        assert _record_run(history, node="adopter", token=7) is Recorded.WRITTEN
        [record] = history.runs(TASK)
        assert (record.node, record.attempt, record.token, record.state) == (
            "adopter",
            2,
            7,
            RunState.SUCCEEDED,
        )
        assert record.started_at == T0 + SECOND

    def test_a_newer_attempt_fences_the_run(self, history: RunHistory) -> None:
        assert history.start(TASK, T0, lock=LOCK, node="adopter", token=9, at=T0) == 1
        assert _record_run(history, node="zombie", token=7) is Recorded.FENCED
        [record] = history.runs(TASK)
        assert (record.node, record.state, record.token) == ("adopter", RunState.RUNNING, 9)
        history.finish(TASK, T0, lock=LOCK, token=9, state=RunState.SUCCEEDED, error=None, at=T0)
        assert _record_run(history, node="zombie", token=7) is Recorded.FENCED
        assert history.runs(TASK)[0].node == "adopter"

    def test_its_own_finished_record_is_left_as_it_is(self, history: RunHistory) -> None:
        """A finish whose reply was lost: the record is this run's already."""
        _finished(history, token=7, state=RunState.SUCCEEDED)
        before = history.runs(TASK)
        assert _record_run(history, node="a", token=7) is Recorded.ALREADY
        assert history.runs(TASK) == before

    def test_a_finished_record_of_an_older_token_is_replaced_by_the_newer_run(
        self, history: RunHistory
    ) -> None:
        """An adopter whose start went unrecorded, and the adopted run finished after
        all: the newest attempt that ran owns the record, as `start` would have made it."""
        _finished(history, token=3)
        assert _record_run(history, node="adopter", token=7) is Recorded.WRITTEN
        [record] = history.runs(TASK)
        assert (record.node, record.attempt, record.token, record.state, record.error) == (
            "adopter",
            2,
            7,
            RunState.SUCCEEDED,
            None,
        )

    def test_a_success_is_replaced_by_a_newer_success_only(self, history: RunHistory) -> None:
        """An adopter whose start went unrecorded fails, and the adopted run had
        committed its success (with the task's writes, `atomic`): the success stands.
        A newer run's failure over it would record a fire whose effect committed as
        failed."""
        _finished(history, token=3, state=RunState.SUCCEEDED)
        before = history.runs(TASK)
        for ending in (RunState.FAILED, RunState.EXPIRED, RunState.TIMED_OUT):
            assert _record_run(history, node="adopter", token=7, state=ending) is (
                Recorded.SUCCEEDED
            ), ending
            assert history.runs(TASK) == before
        assert _record_run(history, node="adopter", token=7) is Recorded.WRITTEN
        [record] = history.runs(TASK)
        assert (record.node, record.attempt, record.token, record.state) == (
            "adopter",
            2,
            7,
            RunState.SUCCEEDED,
        )

    def test_a_late_end_is_written_over_the_expiry_of_its_own_run(
        self, history: RunHistory
    ) -> None:
        """A run whose task lock was lost while it ran (its node stalled past its
        lease): the task's next fire, on another node, found its record `running`
        past grace and closed it `expired`. The run then ended: its real end is
        written over the expiry, as the same attempt, and says its lock was lost."""
        assert history.start(TASK, T0, lock=LOCK, node="a", token=7, at=T0 + SECOND) == 1
        reason = "attempt 1 on a stopped holding the task lock without finishing"
        expired = T0 + 2 * SECOND
        assert history.finish(
            TASK, T0, lock=LOCK, token=9, state=RunState.EXPIRED, error=reason, at=expired
        )
        assert not history.finish(
            TASK, T0, lock=LOCK, token=7, state=RunState.SUCCEEDED, error=None, at=expired
        ), "finish closes a running record only"
        assert _record_run(history, node="a", token=7) is Recorded.WRITTEN
        [record] = history.runs(TASK)
        assert (record.node, record.attempt, record.token, record.state) == (
            "a",
            1,
            7,
            RunState.SUCCEEDED,
        )
        assert (record.started_at, record.ended_at) == (T0 + SECOND, T0 + 3 * SECOND)
        assert record.error == LATE_END_NOTE
        assert _record_run(history, node="a", token=7) is Recorded.ALREADY
        assert history.start(TASK, T0, lock=LOCK, node="b", token=11, at=T0) is None
        assert history.runs(TASK) == [record]

    def test_a_late_failure_keeps_its_error_beside_the_note(self, history: RunHistory) -> None:
        """Closed by prune (`expire_dead`) instead: the run's own end is written too."""
        assert history.start(TASK, T0, lock=LOCK, node="a", token=7, at=T0) == 1
        assert history.expire_dead(T0 + SECOND, at=T0 + 2 * SECOND) == 1
        outcome = _record_run(history, token=7, state=RunState.FAILED, error="ValueError: no")
        assert outcome is Recorded.WRITTEN
        [record] = history.runs(TASK)
        assert (record.attempt, record.token, record.state) == (1, 7, RunState.FAILED)
        assert record.error == f"{LATE_END_NOTE}; ValueError: no"

    def test_a_run_that_ended_expired_leaves_the_expiry_as_it_is(self, history: RunHistory) -> None:
        assert history.start(TASK, T0, lock=LOCK, node="a", token=7, at=T0) == 1
        assert history.finish(
            TASK, T0, lock=LOCK, token=9, state=RunState.EXPIRED, error="gone", at=T0
        )
        before = history.runs(TASK)
        assert _record_run(history, token=7, state=RunState.EXPIRED) is Recorded.ALREADY
        assert history.runs(TASK) == before

    def test_a_newer_attempt_after_the_expiry_fences_the_late_end(
        self, history: RunHistory
    ) -> None:
        """The expired fire run again by a newer attempt (a backfill's run whose start
        went unrecorded, written whole): the old run's end is fenced, never written
        over the newer attempt's record."""
        assert history.start(TASK, T0, lock=LOCK, node="a", token=7, at=T0) == 1
        assert history.finish(
            TASK, T0, lock=LOCK, token=9, state=RunState.EXPIRED, error="gone", at=T0
        )
        assert history.start(TASK, T0, lock=LOCK, node="b", token=9, at=T0) is None
        newer = _record_run(history, node="b", token=11, state=RunState.FAILED, error="e")
        assert newer is Recorded.WRITTEN
        [owned] = history.runs(TASK)
        assert (owned.node, owned.attempt, owned.token, owned.state) == (
            "b",
            2,
            11,
            RunState.FAILED,
        )
        for ending in (RunState.SUCCEEDED, RunState.FAILED):
            assert _record_run(history, node="a", token=7, state=ending) is Recorded.FENCED
            assert history.runs(TASK) == [owned]

    def test_the_expiry_of_a_newer_attempt_fences_the_late_end(self, history: RunHistory) -> None:
        """Attempt 1 adopted by attempt 2, which was closed expired in turn: attempt 1's
        end is older than the record, and fenced."""
        assert history.start(TASK, T0, lock=LOCK, node="a", token=7, at=T0) == 1
        assert history.start(TASK, T0, lock=LOCK, node="b", token=9, at=T0) == 2
        assert history.finish(
            TASK, T0, lock=LOCK, token=12, state=RunState.EXPIRED, error="gone", at=T0
        )
        before = history.runs(TASK)
        assert _record_run(history, node="a", token=7) is Recorded.FENCED
        assert history.runs(TASK) == before

    def test_a_late_end_without_a_token_leaves_the_expiry(self, history: RunHistory) -> None:
        """A run without a token cannot show that the expired record is its own (a
        record without a token may hold another run's attempt): nothing is written."""
        assert history.start(TASK, T0, lock=LOCK, node="a", token=None, at=T0) == 1
        assert history.finish(
            TASK, T0, lock=LOCK, token=None, state=RunState.EXPIRED, error="gone", at=T0
        )
        before = history.runs(TASK)
        assert _record_run(history, token=None) is not Recorded.WRITTEN
        assert history.runs(TASK) == before

    def test_runs_without_tokens_neither_fence_nor_are_fenced(self, history: RunHistory) -> None:
        assert _record_run(history, token=None) is Recorded.WRITTEN
        assert _record_run(history, token=None, node="b") is Recorded.ALREADY
        assert history.runs(TASK)[0].node == "a"
        later = T0 + SECOND
        assert history.start(TASK, later, lock=LOCK, node="a", token=None, at=later) == 1
        assert _record_run(history, token=None, instant=later) is Recorded.WRITTEN
        assert history.runs(TASK)[0].state is RunState.SUCCEEDED
        latest = T0 + 2 * SECOND
        assert history.start(TASK, latest, lock=LOCK, node="fenced", token=4, at=latest) == 1
        assert _record_run(history, token=None, instant=latest) is Recorded.FENCED
        assert history.runs(TASK)[0].state is RunState.RUNNING

    def test_a_recorded_run_is_never_started_again(self, history: RunHistory) -> None:
        assert _record_run(history, token=7) is Recorded.WRITTEN
        assert history.start(TASK, T0, lock=LOCK, node="b", token=99, at=T0) is None
        assert history.start(TASK, T0, lock=LOCK, node="b", token=None, at=T0) is None
        assert not history.skip(TASK, T0, lock=LOCK, node="b", reason="late", at=T0)
        assert history.runs(TASK)[0].node == "a"

    def test_only_finished_states_are_written(self, history: RunHistory) -> None:
        for state in (RunState.RUNNING, RunState.SKIPPED):
            with pytest.raises(ValueError):
                _record_run(history, state=state)
        assert history.runs(TASK) == []

    def test_a_long_error_is_clipped(self, history: RunHistory) -> None:
        _record_run(history, state=RunState.FAILED, error="x" * 10_000)
        error = history.runs(TASK)[0].error
        assert error is not None
        assert 100 < len(error) <= MAX_ERROR_LENGTH

    def test_a_naive_instant_is_refused(self, history: RunHistory) -> None:
        with pytest.raises(ValueError):
            _record_run(history, instant=T0.replace(tzinfo=None))

    def test_it_keeps_to_its_lock(self, history: RunHistory) -> None:
        assert history.start(TASK, T0, lock=OTHER_LOCK, node="staging", token=99, at=T0) == 1
        assert _record_run(history, token=7) is Recorded.WRITTEN
        states = {(r.lock, r.node): r.state for r in history.runs(TASK)}
        assert states == {
            (LOCK, "a"): RunState.SUCCEEDED,
            (OTHER_LOCK, "staging"): RunState.RUNNING,
        }

    def test_concurrent_runs_end_with_the_newest_token(self, history: RunHistory) -> None:
        assert history.start(TASK, T0, lock=LOCK, node="dead", token=0, at=T0) == 1
        results: dict[int, Recorded] = {}
        barrier = threading.Barrier(8)

        def write(token: int) -> None:
            barrier.wait()
            results[token] = _record_run(history, node=f"n{token}", token=token)

        threads = [threading.Thread(target=write, args=(token,)) for token in range(1, 9)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        [record] = history.runs(TASK)
        assert (record.node, record.token, record.state) == ("n8", 8, RunState.SUCCEEDED)
        assert results[8] is Recorded.WRITTEN
        assert set(results.values()) <= {Recorded.WRITTEN, Recorded.FENCED}
        assert len(results) == 8
        written = sum(outcome is Recorded.WRITTEN for outcome in results.values())
        assert record.attempt == written + 1, "each accepted write counted one attempt"
