"""The reading part of the run-history contract (`RunHistoryContract` includes it).

What the history's readers (the CLI, the catch-up, the alerts) can rely on: which
records each query lists and in which order, exact task names, and instants that
come back as they went in, in UTC to the microsecond.
"""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest

from firefly_scheduling.history.port import SUCCESS_STATES, RunHistory, RunState
from firefly_scheduling.testing.history_record_run_contract import LOCK, SECOND, T0, TASK


class RunHistoryReadingContract:
    """Cases of `RunHistory`'s queries every store must pass."""

    def test_unfinished_lists_running_records_of_the_task_oldest_first(
        self, history: RunHistory
    ) -> None:
        for offset in (3, 1, 2):
            history.start(TASK, T0 + offset * SECOND, lock=LOCK, node="a", token=offset, at=T0)
        history.finish(
            TASK, T0 + 2 * SECOND, lock=LOCK, token=2, state=RunState.FAILED, error=None, at=T0
        )
        history.start("app.jobs:other", T0, lock="app.jobs:other", node="a", token=1, at=T0)
        assert [r.instant for r in history.unfinished(TASK, lock=LOCK)] == [
            T0 + SECOND,
            T0 + 3 * SECOND,
        ]

    def test_runs_are_newest_first_limited_and_filtered(self, history: RunHistory) -> None:
        for offset in range(5):
            history.start(TASK, T0 + offset * SECOND, lock=LOCK, node="a", token=offset, at=T0)
        history.skip(
            "app.jobs:other",
            T0 + 10 * SECOND,
            lock="app.jobs:other",
            node="a",
            reason="late",
            at=T0,
        )
        assert [r.instant for r in history.runs(TASK, limit=3)] == [
            T0 + 4 * SECOND,
            T0 + 3 * SECOND,
            T0 + 2 * SECOND,
        ]
        everything = history.runs(limit=100)
        assert len(everything) == 6
        assert everything[0].task == "app.jobs:other"

    def test_task_names_are_exact(self, history: RunHistory) -> None:
        long_name = "app.jobs:" + "x" * 246
        for name in ("app.jobs:Report", "app.jobs:report", long_name):
            assert history.start(name, T0, lock=name, node="a", token=1, at=T0) == 1
        assert {r.task for r in history.runs(limit=10)} == {
            "app.jobs:Report",
            "app.jobs:report",
            long_name,
        }

    def test_instants_round_trip_to_the_microsecond_in_utc(self, history: RunHistory) -> None:
        paris = timezone(timedelta(hours=1))
        history.start(TASK, T0.astimezone(paris), lock=LOCK, node="a", token=1, at=T0)
        history.start(TASK, T0 + timedelta(microseconds=1), lock=LOCK, node="a", token=1, at=T0)
        instants = [r.instant for r in history.runs(TASK)]
        assert instants == [T0 + timedelta(microseconds=1), T0]
        assert all(instant.utcoffset() == timedelta(0) for instant in instants)

    def test_naive_instants_are_refused(self, history: RunHistory) -> None:
        with pytest.raises(ValueError):
            history.start(TASK, T0.replace(tzinfo=None), lock=LOCK, node="a", token=1, at=T0)

    def test_last_success_is_the_newest_succeeded_run(self, history: RunHistory) -> None:
        assert history.last_success(TASK, lock=LOCK) is None
        for offset, state in (
            (1, RunState.SUCCEEDED),
            (2, RunState.SUCCEEDED),
            (3, RunState.FAILED),
        ):
            instant = T0 + offset * SECOND
            history.start(TASK, instant, lock=LOCK, node="a", token=offset, at=instant)
            history.finish(
                TASK, instant, lock=LOCK, token=offset, state=state, error=None, at=instant
            )
        success = history.last_success(TASK, lock=LOCK)
        assert success is not None
        assert success.instant == T0 + 2 * SECOND

    def test_failures_since_lists_failed_expired_and_timed_out_runs(
        self, history: RunHistory
    ) -> None:
        states = (
            RunState.FAILED,
            RunState.EXPIRED,
            RunState.SUCCEEDED,
            RunState.FAILED,
            RunState.TIMED_OUT,
        )
        for offset, state in enumerate(states):
            instant = T0 + offset * timedelta(hours=1)
            history.start(TASK, instant, lock=LOCK, node="a", token=offset, at=instant)
            history.finish(
                TASK, instant, lock=LOCK, token=offset, state=state, error="e", at=instant
            )
        found = history.failures_since(T0 + timedelta(minutes=30))
        assert [(r.instant, r.state) for r in found] == [
            (T0 + timedelta(hours=4), RunState.TIMED_OUT),
            (T0 + timedelta(hours=3), RunState.FAILED),
            (T0 + timedelta(hours=1), RunState.EXPIRED),
        ]

    def test_recorded_instants_are_every_record_of_the_task_in_the_window(
        self, history: RunHistory
    ) -> None:
        history.start(TASK, T0 + SECOND, lock=LOCK, node="a", token=1, at=T0)
        history.finish(
            TASK, T0 + SECOND, lock=LOCK, token=1, state=RunState.CAUGHT_UP, error=None, at=T0
        )
        history.start(TASK, T0 + 2 * SECOND, lock=LOCK, node="a", token=2, at=T0)
        history.skip(TASK, T0 + 3 * SECOND, lock=LOCK, node="a", reason="late", at=T0)
        history.skip(TASK, T0 + 9 * SECOND, lock=LOCK, node="a", reason="late", at=T0)
        history.skip(TASK, T0 + 2 * SECOND, lock="other-deployment", node="a", reason="x", at=T0)
        history.skip("app.jobs:other", T0 + 2 * SECOND, lock=LOCK, node="a", reason="x", at=T0)
        found = history.recorded_instants(TASK, lock=LOCK, after=T0 + SECOND, until=T0 + 3 * SECOND)
        assert found == {T0 + 2 * SECOND, T0 + 3 * SECOND}
        everything = history.recorded_instants(TASK, lock=LOCK, after=T0, until=T0 + 9 * SECOND)
        assert everything == {T0 + offset * SECOND for offset in (1, 2, 3, 9)}
        assert all(instant.tzinfo is not None for instant in everything)
        succeeded = history.recorded_instants(
            TASK, lock=LOCK, after=T0, until=T0 + 9 * SECOND, states=SUCCESS_STATES
        )
        assert succeeded == {T0 + SECOND}
        skipped = history.recorded_instants(
            TASK, lock=LOCK, after=T0, until=T0 + 9 * SECOND, states={RunState.SKIPPED}
        )
        assert skipped == {T0 + 3 * SECOND, T0 + 9 * SECOND}

    def test_records_between_are_those_of_the_window_in_the_states_oldest_first(
        self, history: RunHistory
    ) -> None:
        for offset in (3, 1, 2):
            history.start(TASK, T0 + offset * SECOND, lock=LOCK, node="a", token=offset, at=T0)
            history.finish(
                TASK,
                T0 + offset * SECOND,
                lock=LOCK,
                token=offset,
                state=RunState.FAILED if offset != 2 else RunState.SUCCEEDED,
                error="boom",
                at=T0,
            )
        history.start(TASK, T0 + 4 * SECOND, lock=LOCK, node="a", token=4, at=T0)
        history.skip(TASK, T0 + SECOND, lock="other-deployment", node="a", reason="x", at=T0)
        found = history.records_between(
            TASK, lock=LOCK, after=T0, until=T0 + 4 * SECOND, states={RunState.FAILED}
        )
        assert [(r.instant, r.state, r.attempt) for r in found] == [
            (T0 + SECOND, RunState.FAILED, 1),
            (T0 + 3 * SECOND, RunState.FAILED, 1),
        ]
        assert (
            history.records_between(
                TASK, lock=LOCK, after=T0 + SECOND, until=T0 + 2 * SECOND, states={RunState.FAILED}
            )
            == []
        )

    def test_last_success_counts_a_caught_up_run(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="a", token=1, at=T0)
        history.finish(TASK, T0, lock=LOCK, token=1, state=RunState.SUCCEEDED, error=None, at=T0)
        history.start(TASK, T0 + SECOND, lock=LOCK, node="a", token=2, at=T0)
        history.finish(
            TASK, T0 + SECOND, lock=LOCK, token=2, state=RunState.CAUGHT_UP, error="late", at=T0
        )
        found = history.last_success(TASK, lock=LOCK)
        assert found is not None
        assert (found.instant, found.state) == (T0 + SECOND, RunState.CAUGHT_UP)
