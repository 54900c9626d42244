"""The `start_retry` part of the run-history contract (`RunHistoryContract` includes it).

A retry of a failed fire (`fires.retries`) starts on the fire's record: one
conditional write that takes a `failed` or `timed_out` record at the attempt the
retry follows, and nothing else, so two starts of one retry never both succeed. A
store without `RetryStartingHistory` skips these cases (its retries run with their
starts unrecorded, and are written whole at their end).
"""

from __future__ import annotations

import threading

import pytest

from firefly_scheduling.history.port import RetryStartingHistory, RunHistory, RunState
from firefly_scheduling.testing.history_record_run_contract import LOCK, SECOND, T0, TASK


def _retries(history: RunHistory) -> RetryStartingHistory:
    if not isinstance(history, RetryStartingHistory):
        pytest.skip("this store starts no retries (RetryStartingHistory)")
    return history


def _ended(history: RunHistory, state: RunState, *, token: int | None = 7) -> None:
    """The fire's first attempt, ended as `state`."""
    assert history.start(TASK, T0, lock=LOCK, node="first", token=token, at=T0) == 1
    assert history.finish(TASK, T0, lock=LOCK, token=token, state=state, error="e", at=T0)


def _start_retry(
    history: RetryStartingHistory, *, after: int = 1, token: int | None = 8, node: str = "b"
) -> int | None:
    return history.start_retry(
        TASK,
        T0,
        lock=LOCK,
        node=node,
        token=token,
        after_attempt=after,
        note="retry 1 of 3",
        at=T0 + 5 * SECOND,
    )


class RetryStartContract:
    """Cases of `RetryStartingHistory.start_retry` every store that has it must pass."""

    @pytest.mark.parametrize("state", [RunState.FAILED, RunState.TIMED_OUT])
    def test_a_retry_takes_a_failed_record_over_as_the_next_attempt(
        self, history: RunHistory, state: RunState
    ) -> None:
        retries = _retries(history)
        _ended(history, state)
        assert _start_retry(retries) == 2
        [record] = history.runs(TASK)
        assert (record.state, record.attempt, record.node, record.token) == (
            RunState.RUNNING,
            2,
            "b",
            8,
        )
        assert (record.started_at, record.ended_at, record.error) == (
            T0 + 5 * SECOND,
            None,
            "retry 1 of 3",
        )
        # It ends as any run does, its token checked.
        assert history.finish(
            TASK, T0, lock=LOCK, token=8, state=RunState.SUCCEEDED, error=None, at=T0
        )
        assert history.runs(TASK)[0].state is RunState.SUCCEEDED

    @pytest.mark.parametrize("state", [RunState.SUCCEEDED, RunState.EXPIRED])
    def test_a_fire_that_did_not_fail_is_never_retried(
        self, history: RunHistory, state: RunState
    ) -> None:
        retries = _retries(history)
        _ended(history, state)
        assert _start_retry(retries) is None
        assert history.runs(TASK)[0].state is state

    def test_a_running_skipped_or_absent_record_is_not_taken(self, history: RunHistory) -> None:
        retries = _retries(history)
        assert _start_retry(retries) is None
        assert history.runs(TASK) == []
        assert history.skip(TASK, T0, lock=LOCK, node="a", reason="late", at=T0)
        assert _start_retry(retries) is None
        other = T0 + SECOND
        assert history.start(TASK, other, lock=LOCK, node="a", token=7, at=T0) == 1
        assert (
            retries.start_retry(
                TASK, other, lock=LOCK, node="b", token=8, after_attempt=1, note=None, at=T0
            )
            is None
        )
        assert {record.state for record in history.runs(TASK)} == {
            RunState.SKIPPED,
            RunState.RUNNING,
        }

    def test_only_the_attempt_it_follows_is_taken(self, history: RunHistory) -> None:
        """A retry that comes late (its record moved on to a later attempt) is refused."""
        retries = _retries(history)
        _ended(history, RunState.FAILED)
        assert _start_retry(retries, after=2) is None
        assert _start_retry(retries, after=1) == 2
        assert history.finish(
            TASK, T0, lock=LOCK, token=8, state=RunState.FAILED, error="again", at=T0
        )
        assert _start_retry(retries, after=1, token=9) is None  # retry 1 ran already
        assert _start_retry(retries, after=2, token=9) == 3

    def test_of_two_concurrent_starts_of_one_retry_one_wins(self, history: RunHistory) -> None:
        retries = _retries(history)
        _ended(history, RunState.FAILED)
        answers: list[int | None] = []
        barrier = threading.Barrier(4)

        def start(node: str) -> None:
            barrier.wait()
            answers.append(_start_retry(retries, node=node, token=None))

        threads = [threading.Thread(target=start, args=(f"n{n}",)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(answers, key=str) == [2, None, None, None]
