"""The reusable `RunHistory` contract: the rules of `history.port`, proven on each store.

A store plugs in by subclassing `RunHistoryContract` and supplying the fixture
`history`: a new, EMPTY store (`prune` and `expire_dead` act on every task), closed
by the fixture afterwards. The writing rules are here; `record_run` and the queries
have modules of their own (`history_record_run_contract`, `history_reading_contract`,
`history_retry_contract`, `history_trigger_contract`)::

    class TestMyHistory(RunHistoryContract):
        @pytest.fixture
        def history(self):
            store = MyHistory(url, table=f"runs_{uuid.uuid4().hex[:8]}")
            yield store
            store.drop()
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from firefly_scheduling.history.port import (
    MAX_ERROR_LENGTH,
    BatchStartingHistory,
    NewRun,
    RunHistory,
    RunState,
)
from firefly_scheduling.testing.history_buffer_contract import BufferedRecordContract
from firefly_scheduling.testing.history_reading_contract import RunHistoryReadingContract
from firefly_scheduling.testing.history_record_run_contract import (
    LOCK,
    OTHER_LOCK,
    SECOND,
    T0,
    TASK,
    RecordRunContract,
)
from firefly_scheduling.testing.history_retry_contract import RetryStartContract
from firefly_scheduling.testing.history_trigger_contract import TriggerRecordContract


class RunHistoryContract(
    RecordRunContract,
    RunHistoryReadingContract,
    RetryStartContract,
    BufferedRecordContract,
    TriggerRecordContract,
):
    """Cases every `RunHistory` implementation must pass (`record_run` and queries included)."""

    # -- start ----------------------------------------------------------------------

    def test_start_records_a_running_fire_with_attempt_one(self, history: RunHistory) -> None:
        assert history.start(TASK, T0, lock=LOCK, node="a", token=7, at=T0 + SECOND) == 1
        [record] = history.runs(TASK)
        assert (record.lock, record.task, record.instant, record.node) == (LOCK, TASK, T0, "a")
        assert (record.attempt, record.state, record.token) == (1, RunState.RUNNING, 7)
        assert record.started_at == T0 + SECOND
        assert record.ended_at is None
        assert record.duration is None

    def test_start_is_refused_for_a_token_that_is_not_newer(self, history: RunHistory) -> None:
        assert history.start(TASK, T0, lock=LOCK, node="a", token=7, at=T0) == 1
        assert history.start(TASK, T0, lock=LOCK, node="b", token=7, at=T0) is None
        assert history.start(TASK, T0, lock=LOCK, node="b", token=6, at=T0) is None
        assert history.runs(TASK)[0].node == "a"

    def test_a_newer_token_adopts_a_running_fire_as_the_next_attempt(
        self, history: RunHistory
    ) -> None:
        assert history.start(TASK, T0, lock=LOCK, node="a", token=7, at=T0) == 1
        assert history.start(TASK, T0, lock=LOCK, node="b", token=9, at=T0 + SECOND) == 2
        assert history.start(TASK, T0, lock=LOCK, node="c", token=12, at=T0 + 2 * SECOND) == 3
        [record] = history.runs(TASK)
        assert (record.node, record.attempt, record.token) == ("c", 3, 12)
        assert record.started_at == T0 + 2 * SECOND

    def test_a_finished_fire_is_never_started_again(self, history: RunHistory) -> None:
        finished = (
            RunState.SUCCEEDED,
            RunState.FAILED,
            RunState.EXPIRED,
            RunState.TIMED_OUT,
            RunState.CANCELLED,
        )
        for minutes, state in enumerate(finished, start=1):
            instant = T0 + timedelta(minutes=minutes)
            history.start(TASK, instant, lock=LOCK, node="a", token=1, at=instant)
            assert history.finish(
                TASK, instant, lock=LOCK, token=1, state=state, error=None, at=instant
            )
            assert history.start(TASK, instant, lock=LOCK, node="b", token=99, at=instant) is None
            assert history.start(TASK, instant, lock=LOCK, node="b", token=None, at=instant) is None

    # -- start_new_many (stores that batch starts) -------------------------------------

    def _batching(self, history: RunHistory) -> BatchStartingHistory:
        if not isinstance(history, BatchStartingHistory):
            pytest.skip(f"{type(history).__name__} does not start runs in batches")
        return history

    def test_new_runs_start_together_as_attempt_one(self, history: RunHistory) -> None:
        batching = self._batching(history)
        runs = [
            NewRun(LOCK, TASK, T0, 7),
            NewRun(OTHER_LOCK, TASK, T0, None),
            NewRun("production:app.jobs:mail", "app.jobs:mail", T0 + SECOND, 3),
        ]
        assert batching.start_new_many(runs, node="a", at=T0 + SECOND) == [True, True, True]
        for run in runs:
            [record] = history.unfinished(run.task, lock=run.lock)
            assert (record.instant, record.node, record.attempt) == (run.instant, "a", 1)
            assert (record.state, record.token, record.started_at) == (
                RunState.RUNNING,
                run.token,
                T0 + SECOND,
            )
        assert history.finish(
            TASK, T0, lock=LOCK, token=7, state=RunState.SUCCEEDED, error=None, at=T0
        )
        assert batching.start_new_many(runs, node="b", at=T0) == [False, False, False]
        assert [r.node for r in history.runs(limit=10)] == ["a", "a", "a"]
        assert batching.start_new_many([], node="a", at=T0) == []

    def test_a_batch_starts_nothing_in_the_way_of_the_usual_start(
        self, history: RunHistory
    ) -> None:
        """A skipped fire, a task running elsewhere, a finished fire: left alone."""
        batching = self._batching(history)
        names = ("skipped", "busy", "done", "new")
        skipped, busy, done, new = (f"app.jobs:{name}" for name in names)
        history.skip(skipped, T0, lock=skipped, node="x", reason="too late", at=T0)
        history.start(busy, T0 - SECOND, lock=busy, node="x", token=1, at=T0)
        history.start(done, T0, lock=done, node="x", token=1, at=T0)
        history.finish(done, T0, lock=done, token=1, state=RunState.FAILED, error="e", at=T0)
        history.start(new, T0, lock=OTHER_LOCK, node="x", token=1, at=T0)  # another lock's
        before = sorted(history.runs(limit=10), key=lambda r: r.task)
        runs = [NewRun(name, name, T0, 5) for name in (skipped, busy, done)]
        runs.append(NewRun(new, new, T0, 5))
        assert batching.start_new_many(runs, node="b", at=T0) == [False, False, False, True]
        after = sorted(history.runs(limit=10), key=lambda r: r.task)
        assert [r for r in after if r.lock != new] == before
        assert history.start(skipped, T0, lock=skipped, node="b", token=5, at=T0) == 1
        assert [r.instant for r in history.unfinished(busy, lock=busy)] == [T0 - SECOND]

    def test_a_batch_with_a_naive_instant_is_refused_whole(self, history: RunHistory) -> None:
        batching = self._batching(history)
        runs = [NewRun(LOCK, TASK, T0, 1), NewRun(OTHER_LOCK, TASK, T0.replace(tzinfo=None), 2)]
        with pytest.raises(ValueError):
            batching.start_new_many(runs, node="a", at=T0)
        assert history.runs(limit=10) == []

    # -- finish and fencing ------------------------------------------------------------

    def test_finish_closes_the_run(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="a", token=3, at=T0)
        assert history.finish(
            TASK,
            T0,
            lock=LOCK,
            token=3,
            state=RunState.FAILED,
            error="ValueError: no",
            at=T0 + 2 * SECOND,
        )
        [record] = history.runs(TASK)
        assert (record.state, record.error, record.ended_at) == (
            RunState.FAILED,
            "ValueError: no",
            T0 + 2 * SECOND,
        )
        assert record.duration == pytest.approx(2.0)

    def test_a_zombie_write_is_fenced_and_no_state_flips_back(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="zombie", token=5, at=T0)
        assert history.start(TASK, T0, lock=LOCK, node="adopter", token=8, at=T0 + SECOND) == 2
        # The zombie wakes up while the adopter runs: refused.
        assert not history.finish(
            TASK, T0, lock=LOCK, token=5, state=RunState.FAILED, error="late", at=T0 + 2 * SECOND
        )
        assert history.runs(TASK)[0].state is RunState.RUNNING
        assert history.finish(
            TASK, T0, lock=LOCK, token=8, state=RunState.SUCCEEDED, error=None, at=T0 + 3 * SECOND
        )
        # ... or after it finished: refused, and the record stays as the adopter left it.
        assert not history.finish(
            TASK, T0, lock=LOCK, token=5, state=RunState.FAILED, error="later", at=T0 + 4 * SECOND
        )
        [record] = history.runs(TASK)
        assert (record.state, record.node, record.attempt, record.error) == (
            RunState.SUCCEEDED,
            "adopter",
            2,
            None,
        )

    def test_finish_twice_is_refused(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="a", token=3, at=T0)
        assert history.finish(
            TASK, T0, lock=LOCK, token=3, state=RunState.SUCCEEDED, error=None, at=T0
        )
        assert not history.finish(
            TASK, T0, lock=LOCK, token=3, state=RunState.FAILED, error="x", at=T0
        )
        assert history.runs(TASK)[0].state is RunState.SUCCEEDED

    def test_finish_of_an_unknown_fire_is_refused(self, history: RunHistory) -> None:
        assert not history.finish(
            TASK, T0, lock=LOCK, token=3, state=RunState.SUCCEEDED, error=None, at=T0
        )
        assert history.runs(TASK) == []

    def test_finish_only_writes_finished_states(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="a", token=3, at=T0)
        for state in (RunState.RUNNING, RunState.SKIPPED):
            with pytest.raises(ValueError):
                history.finish(TASK, T0, lock=LOCK, token=3, state=state, error=None, at=T0)

    def test_runs_without_tokens_neither_fence_nor_are_fenced(self, history: RunHistory) -> None:
        assert history.start(TASK, T0, lock=LOCK, node="a", token=None, at=T0) == 1
        assert history.finish(
            TASK, T0, lock=LOCK, token=None, state=RunState.SUCCEEDED, error=None, at=T0
        )
        later = T0 + SECOND
        history.start(TASK, later, lock=LOCK, node="a", token=4, at=later)
        assert not history.finish(
            TASK, later, lock=LOCK, token=None, state=RunState.SUCCEEDED, error=None, at=later
        )
        assert history.finish(
            TASK, later, lock=LOCK, token=4, state=RunState.SUCCEEDED, error=None, at=later
        )

    def test_long_errors_are_clipped(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="a", token=1, at=T0)
        history.finish(
            TASK, T0, lock=LOCK, token=1, state=RunState.FAILED, error="x" * 10_000, at=T0
        )
        error = history.runs(TASK)[0].error
        assert error is not None
        assert 100 < len(error) <= MAX_ERROR_LENGTH

    # -- skip -----------------------------------------------------------------------

    def test_skip_is_recorded_once_and_a_start_replaces_it(self, history: RunHistory) -> None:
        assert history.skip(TASK, T0, lock=LOCK, node="late", reason="3s late", at=T0 + 3 * SECOND)
        assert not history.skip(TASK, T0, lock=LOCK, node="other", reason="again", at=T0)
        [record] = history.runs(TASK)
        assert (record.state, record.node, record.error) == (RunState.SKIPPED, "late", "3s late")
        assert record.started_at is None
        assert history.start(TASK, T0, lock=LOCK, node="a", token=2, at=T0) == 1
        assert history.runs(TASK)[0].state is RunState.RUNNING

    def test_skip_never_overwrites_a_run(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="a", token=2, at=T0)
        assert not history.skip(TASK, T0, lock=LOCK, node="b", reason="late", at=T0)
        history.finish(TASK, T0, lock=LOCK, token=2, state=RunState.SUCCEEDED, error=None, at=T0)
        assert not history.skip(TASK, T0, lock=LOCK, node="b", reason="late", at=T0)
        assert history.runs(TASK)[0].state is RunState.SUCCEEDED

    def test_skip_many_records_the_fires_nobody_ran_and_counts_the_new_ones(
        self, history: RunHistory
    ) -> None:
        history.start(TASK, T0 + SECOND, lock=LOCK, node="a", token=2, at=T0)
        history.skip(TASK, T0 + 2 * SECOND, lock=LOCK, node="b", reason="late", at=T0)
        instants = [T0 + i * SECOND for i in range(5)]
        at = T0 + 9 * SECOND
        assert history.skip_many(TASK, instants, lock=LOCK, node="c", reason="gap", at=at) == 3
        records = {r.instant: r for r in history.runs(TASK, limit=10)}
        assert sorted(records) == instants
        assert records[T0 + SECOND].state is RunState.RUNNING, "a run keeps its record"
        assert (records[T0 + 2 * SECOND].node, records[T0 + 2 * SECOND].error) == ("b", "late")
        for instant in (T0, T0 + 3 * SECOND, T0 + 4 * SECOND):
            record = records[instant]
            assert (record.state, record.node, record.error) == (RunState.SKIPPED, "c", "gap")
            assert (record.started_at, record.ended_at, record.lock) == (None, at, LOCK)

    def test_skip_many_again_writes_nothing_and_an_empty_list_nothing_at_all(
        self, history: RunHistory
    ) -> None:
        instants = [T0 + i * SECOND for i in range(3)]
        assert history.skip_many(TASK, instants, lock=LOCK, node="a", reason="x", at=T0) == 3
        assert history.skip_many(TASK, instants, lock=LOCK, node="b", reason="y", at=T0) == 0
        assert history.skip_many(TASK, [], lock=LOCK, node="b", reason="y", at=T0) == 0
        assert {r.node for r in history.runs(TASK)} == {"a"}
        assert history.start(TASK, T0, lock=LOCK, node="c", token=1, at=T0) == 1

    def test_skip_many_writes_a_thousand_fires_of_an_outage(self, history: RunHistory) -> None:
        """A node back from an outage names up to `MAX_PASSED_OVER_RECORDED` at once."""
        instants = [T0 + i * SECOND for i in range(1000)]
        history.start(TASK, instants[500], lock=LOCK, node="a", token=1, at=T0)
        assert history.skip_many(TASK, instants, lock=LOCK, node="b", reason="x", at=T0) == 999
        records = history.runs(TASK, limit=2000)
        assert sorted(r.instant for r in records) == instants
        assert sum(r.state is RunState.SKIPPED for r in records) == 999

    def test_skip_many_keeps_to_its_lock(self, history: RunHistory) -> None:
        history.skip(TASK, T0, lock=OTHER_LOCK, node="staging", reason="x", at=T0)
        assert history.skip_many(TASK, [T0], lock=LOCK, node="prod", reason="y", at=T0) == 1
        assert {(r.lock, r.node) for r in history.runs(TASK)} == {
            (LOCK, "prod"),
            (OTHER_LOCK, "staging"),
        }

    # -- the lock name is part of the key ---------------------------------------------

    def test_two_locks_record_the_same_fire_of_a_task_apart(self, history: RunHistory) -> None:
        """Two deployments (lock names) sharing a store run the same targets."""
        assert history.start(TASK, T0, lock=LOCK, node="prod", token=5, at=T0) == 1
        assert history.start(TASK, T0, lock=OTHER_LOCK, node="staging", token=1, at=T0) == 1
        assert [r.node for r in history.unfinished(TASK, lock=LOCK)] == ["prod"]
        assert [r.node for r in history.unfinished(TASK, lock=OTHER_LOCK)] == ["staging"]
        # A token of one lock neither fences nor adopts the other's record.
        assert history.finish(
            TASK, T0, lock=OTHER_LOCK, token=1, state=RunState.SUCCEEDED, error=None, at=T0
        )
        assert history.unfinished(TASK, lock=OTHER_LOCK) == []
        assert [r.state for r in history.unfinished(TASK, lock=LOCK)] == [RunState.RUNNING]
        assert history.last_success(TASK, lock=LOCK) is None
        success = history.last_success(TASK, lock=OTHER_LOCK)
        assert success is not None
        assert (success.lock, success.node) == (OTHER_LOCK, "staging")

    def test_a_skip_under_one_lock_leaves_the_other_free(self, history: RunHistory) -> None:
        assert history.skip(TASK, T0, lock=OTHER_LOCK, node="s", reason="late", at=T0)
        assert history.skip(TASK, T0, lock=LOCK, node="p", reason="late", at=T0)
        assert history.start(TASK, T0, lock=LOCK, node="p", token=2, at=T0) == 1
        states = {r.lock: r.state for r in history.runs(TASK)}
        assert states == {LOCK: RunState.RUNNING, OTHER_LOCK: RunState.SKIPPED}

    def test_runs_filter_by_lock(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="p", token=1, at=T0)
        history.start(TASK, T0 + SECOND, lock=OTHER_LOCK, node="s", token=1, at=T0)
        history.start("app.jobs:other", T0, lock=LOCK, node="p", token=1, at=T0)
        assert {(r.lock, r.task) for r in history.runs(lock=LOCK)} == {
            (LOCK, TASK),
            (LOCK, "app.jobs:other"),
        }
        assert [r.node for r in history.runs(TASK, lock=OTHER_LOCK)] == ["s"]
        assert len(history.runs()) == 3

    def test_lock_names_are_exact(self, history: RunHistory) -> None:
        long_lock = "x" * 255
        for lock in ("Job", "job", "job ", long_lock):
            assert history.start(TASK, T0, lock=lock, node="a", token=1, at=T0) == 1
        assert {r.lock for r in history.runs(limit=10)} == {"Job", "job", "job ", long_lock}

    # -- maintenance --------------------------------------------------------------------

    def test_expire_dead_closes_only_old_running_records(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="dead", token=1, at=T0)
        history.start(
            TASK, T0 + SECOND, lock=LOCK, node="alive", token=2, at=T0 + timedelta(hours=2)
        )
        history.start(TASK, T0 + 2 * SECOND, lock=LOCK, node="done", token=3, at=T0)
        history.finish(
            TASK, T0 + 2 * SECOND, lock=LOCK, token=3, state=RunState.SUCCEEDED, error=None, at=T0
        )
        now = T0 + timedelta(hours=3)
        assert history.expire_dead(T0 + timedelta(hours=1), at=now) == 1
        states = {r.node: (r.state, r.ended_at) for r in history.runs(TASK)}
        assert states["dead"] == (RunState.EXPIRED, now)
        assert states["alive"] == (RunState.RUNNING, None)
        assert states["done"][0] is RunState.SUCCEEDED

    def test_prune_deletes_old_finished_records_and_never_running_ones(
        self, history: RunHistory
    ) -> None:
        old, recent = T0, T0 + timedelta(days=30)
        for node, instant in (("old-ok", old), ("recent-ok", recent)):
            history.start(TASK, instant, lock=LOCK, node=node, token=1, at=instant)
            history.finish(
                TASK, instant, lock=LOCK, token=1, state=RunState.SUCCEEDED, error=None, at=instant
            )
        history.skip(TASK, old + SECOND, lock=LOCK, node="old-skip", reason="late", at=old)
        history.start(TASK, old + 2 * SECOND, lock=LOCK, node="old-running", token=2, at=old)
        assert history.prune(T0 + timedelta(days=7)) == 2
        assert sorted(r.node for r in history.runs(TASK)) == ["old-running", "recent-ok"]

    # -- concurrency ----------------------------------------------------------------------

    def test_concurrent_adopters_end_with_the_newest_token(self, history: RunHistory) -> None:
        history.start(TASK, T0, lock=LOCK, node="dead", token=0, at=T0)
        results: dict[int, int | None] = {}
        barrier = threading.Barrier(8)

        def adopt(token: int) -> None:
            barrier.wait()
            results[token] = history.start(
                TASK, T0, lock=LOCK, node=f"n{token}", token=token, at=T0
            )

        threads = [threading.Thread(target=adopt, args=(token,)) for token in range(1, 9)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        [record] = history.runs(TASK)
        winners = [token for token, attempt in results.items() if attempt is not None]
        assert record.token == 8
        assert record.node == "n8"
        # Each accepted takeover counted one attempt, in token order.
        assert record.attempt == len(winners) + 1
        assert [results[token] for token in sorted(winners)] == list(range(2, len(winners) + 2))
