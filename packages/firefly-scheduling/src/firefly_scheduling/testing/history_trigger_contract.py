"""The trigger part of the run-history contract (`RunHistoryContract` includes it).

What made a fire (`RunRecord.trigger`) and who asked for it (`requested_by`) are
written by the write that creates its record or replaces a placeholder, and kept
through the writes that adopt, close or retry it, so `runs` tells an operator's
trigger and backfill apart from the schedule's fires. A write without them records
`scheduled`, nobody.
"""

from __future__ import annotations

import pytest

from firefly_scheduling.history.port import (
    MAX_REQUESTED_BY_LENGTH,
    SCHEDULED,
    RunHistory,
    RunState,
)
from firefly_scheduling.testing.history_record_run_contract import LOCK, SECOND, T0, TASK


class TriggerRecordContract:
    """Cases of `RunRecord.trigger` every store must pass."""

    def test_a_write_without_a_trigger_records_scheduled(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="a", token=1, at=T0)
        history.skip(TASK, T0 + SECOND, lock=LOCK, node="a", reason="too late", at=T0)
        found = {(record.trigger, record.requested_by) for record in history.runs(TASK)}
        assert found == {(SCHEDULED, None)}

    def test_start_skip_and_record_run_keep_the_trigger_given(self, history: RunHistory) -> None:
        history.start(
            TASK, T0, lock=LOCK, node="a", token=1, at=T0, trigger="manual", requested_by="ann"
        )
        history.skip(
            TASK, T0 + SECOND, lock=LOCK, node="a", reason="paused", at=T0, trigger="backfill"
        )
        history.record_run(
            TASK,
            T0 + 2 * SECOND,
            lock=LOCK,
            node="a",
            token=2,
            state=RunState.SUCCEEDED,
            error=None,
            started_at=T0,
            ended_at=T0 + SECOND,
            trigger="backfill",
            requested_by="bob é",
        )
        found = {record.instant: record for record in history.runs(TASK)}
        assert (found[T0].trigger, found[T0].requested_by) == ("manual", "ann")
        assert found[T0 + 2 * SECOND].requested_by == "bob é"
        assert (found[T0 + SECOND].trigger, found[T0 + SECOND].reason) == ("backfill", "paused")
        assert found[T0 + 2 * SECOND].trigger == "backfill"
        assert found[T0 + 2 * SECOND].reason is None

    def test_a_start_over_a_skip_takes_the_starting_fires_trigger(
        self, history: RunHistory
    ) -> None:
        history.skip(TASK, T0, lock=LOCK, node="a", reason="too late", at=T0)
        assert history.start(
            TASK, T0, lock=LOCK, node="b", token=1, at=T0, trigger="backfill", requested_by="cy"
        )
        history.finish(
            TASK, T0, lock=LOCK, token=1, state=RunState.SUCCEEDED, error=None, at=T0 + SECOND
        )
        [record] = history.runs(TASK)
        assert (record.state, record.trigger, record.requested_by, record.reason) == (
            RunState.SUCCEEDED,
            "backfill",
            "cy",
            None,
        )

    def test_an_adoption_keeps_the_adopted_runs_trigger(self, history: RunHistory) -> None:
        history.start(
            TASK, T0, lock=LOCK, node="a", token=1, at=T0, trigger="manual", requested_by="dee"
        )
        assert history.start(TASK, T0, lock=LOCK, node="b", token=2, at=T0) == 2
        history.record_run(
            TASK,
            T0,
            lock=LOCK,
            node="c",
            token=3,
            state=RunState.FAILED,
            error="boom",
            started_at=T0,
            ended_at=T0 + SECOND,
        )
        [record] = history.runs(TASK)
        assert (record.attempt, record.trigger, record.requested_by) == (3, "manual", "dee")

    def test_a_long_requested_by_is_cut_and_marked(self, history: RunHistory) -> None:
        asker = "x" * (MAX_REQUESTED_BY_LENGTH + 10)
        history.start(TASK, T0, lock=LOCK, node="a", token=1, at=T0, requested_by=asker)
        [record] = history.runs(TASK)
        assert record.requested_by == "x" * (MAX_REQUESTED_BY_LENGTH - 1) + "…"

    @pytest.mark.parametrize("trigger", ["", "x" * 17, "no spaces", "scheduled;--", 3])
    def test_a_trigger_no_store_can_keep_is_refused(
        self, history: RunHistory, trigger: object
    ) -> None:
        with pytest.raises(ValueError, match="trigger"):
            history.start(TASK, T0, lock=LOCK, node="a", token=1, at=T0, trigger=trigger)  # type: ignore[arg-type]  # a caller's wrong type, refused at run time
        assert history.runs(TASK) == []
