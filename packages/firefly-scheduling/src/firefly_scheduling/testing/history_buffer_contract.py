"""Contract cases of a history that marks buffered fires (`history.port.BufferingHistory`).

A fire of an `overlap="buffer_one"` task is recorded `buffered` when it begins to
wait for an earlier run; its start (or its whole run, `record_run`) replaces that
record as attempt 1, as it replaces a skip. A history that does not buffer skips
these cases.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from firefly_scheduling.history.port import BufferingHistory, Recorded, RunHistory, RunState
from firefly_scheduling.testing.history_record_run_contract import LOCK, SECOND, T0, TASK


def _buffering(history: RunHistory) -> BufferingHistory:
    store: object = history
    if not isinstance(store, BufferingHistory):
        pytest.skip(f"{type(history).__name__} does not record buffered fires")
    return store


class BufferedRecordContract:
    """Cases every `BufferingHistory` must pass; mixed into `RunHistoryContract`."""

    def test_a_buffered_fire_is_recorded_once_and_its_start_replaces_it(
        self, history: RunHistory
    ) -> None:
        buffering = _buffering(history)
        assert buffering.buffer(TASK, T0, lock=LOCK, node="b", reason="waits", at=T0 + SECOND)
        assert not buffering.buffer(TASK, T0, lock=LOCK, node="c", reason="again", at=T0)
        [record] = history.runs(TASK)
        assert (record.state, record.node, record.error) == (RunState.BUFFERED, "b", "waits")
        assert record.started_at is None
        assert record.ended_at == T0 + SECOND
        assert history.start(TASK, T0, lock=LOCK, node="b", token=4, at=T0 + 2 * SECOND) == 1
        [record] = history.runs(TASK)
        assert (record.state, record.attempt, record.error) == (RunState.RUNNING, 1, None)

    def test_buffered_skipped_and_run_records_never_overwrite_each_other(
        self, history: RunHistory
    ) -> None:
        buffering = _buffering(history)
        history.start(TASK, T0, lock=LOCK, node="a", token=2, at=T0)
        assert not buffering.buffer(TASK, T0, lock=LOCK, node="b", reason="waits", at=T0)
        history.skip(TASK, T0 + SECOND, lock=LOCK, node="a", reason="late", at=T0)
        assert not buffering.buffer(TASK, T0 + SECOND, lock=LOCK, node="b", reason="w", at=T0)
        buffering.buffer(TASK, T0 + 2 * SECOND, lock=LOCK, node="b", reason="waits", at=T0)
        assert not history.skip(TASK, T0 + 2 * SECOND, lock=LOCK, node="a", reason="x", at=T0)
        states = {r.instant: r.state for r in history.runs(TASK)}
        assert states == {
            T0: RunState.RUNNING,
            T0 + SECOND: RunState.SKIPPED,
            T0 + 2 * SECOND: RunState.BUFFERED,
        }

    def test_the_whole_run_of_a_buffered_fire_replaces_its_record(
        self, history: RunHistory
    ) -> None:
        _buffering(history).buffer(TASK, T0, lock=LOCK, node="b", reason="waits", at=T0)
        written = history.record_run(
            TASK,
            T0,
            lock=LOCK,
            node="b",
            token=3,
            state=RunState.SUCCEEDED,
            error=None,
            started_at=T0 + SECOND,
            ended_at=T0 + 2 * SECOND,
        )
        assert written is Recorded.WRITTEN
        [record] = history.runs(TASK)
        assert (record.state, record.attempt, record.token) == (RunState.SUCCEEDED, 1, 3)

    def test_prune_deletes_old_buffered_records(self, history: RunHistory) -> None:
        buffering = _buffering(history)
        buffering.buffer(TASK, T0, lock=LOCK, node="old", reason="waits", at=T0)
        recent = T0 + timedelta(days=30)
        buffering.buffer(TASK, recent, lock=LOCK, node="recent", reason="waits", at=recent)
        assert history.prune(T0 + timedelta(days=7)) == 1
        assert [r.node for r in history.runs(TASK)] == ["recent"]
