"""The health rules of `firefly-scheduling monitor`, and the `runs` table, on the memory history."""

from __future__ import annotations

import io
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from firefly_scheduling.cli.monitor import health_problems, success_window
from firefly_scheduling.cli.runs import render_runs
from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

# A Monday.
NOW = datetime(2030, 1, 7, 9, 5, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def locked(target: str, **schedule: str | float) -> ScheduledDescriptor:
    return ScheduledDescriptor(target=target, lock_name=target, lock_ttl=30.0, **schedule)  # type: ignore[arg-type]


def record(
    history: MemoryRunHistory, target: str, instant: datetime, state: RunState, error: str = ""
) -> None:
    history.start(target, instant, lock=target, node="n1", token=1, at=instant)
    history.finish(
        target, instant, lock=target, token=1, state=state, error=error or None, at=instant
    )


class TestSuccessWindow:
    @pytest.mark.parametrize(
        ("schedule", "expected"),
        [
            ({"fixed_rate": 1.0}, timedelta(seconds=120)),
            ({"fixed_rate": 300.0}, timedelta(minutes=10)),
            ({"fixed_delay": 90.0}, timedelta(minutes=3)),
            ({"cron": "*/5 * * * *"}, timedelta(minutes=10)),
            ({"cron": "* * * * *"}, timedelta(seconds=120)),
        ],
    )
    def test_twice_the_period_and_at_least_two_minutes(
        self, schedule: dict[str, str | float], expected: timedelta
    ) -> None:
        assert success_window(locked("app:job", **schedule), NOW) == expected

    def test_a_weekday_cron_is_not_stale_on_monday_morning(self) -> None:
        window = success_window(locked("app:job", cron="0 9 * * 1-5"), NOW)
        assert window == timedelta(days=4, minutes=5)  # two fires before Monday's: Thursday

    @pytest.mark.parametrize("cron", ["@yearly", "0 0 29 2 *"])
    def test_rare_crons_look_years_back(self, cron: str) -> None:
        window = success_window(locked("app:job", cron=cron), NOW)
        assert window > timedelta(days=2 * 365)


class TestHealthProblems:
    def test_a_task_succeeding_on_time_is_healthy(self) -> None:
        history = MemoryRunHistory()
        record(history, "app:job", NOW - MINUTE, RunState.SUCCEEDED)
        assert health_problems([locked("app:job", fixed_rate=60.0)], history, NOW) == []

    def test_a_task_that_never_succeeded_is_reported(self) -> None:
        problems = health_problems([locked("app:job", fixed_rate=60.0)], MemoryRunHistory(), NOW)
        assert [str(p) for p in problems] == ["app:job: no successful run recorded"]

    def test_a_stale_success_is_reported_with_the_window(self) -> None:
        history = MemoryRunHistory()
        record(history, "app:job", NOW - 3 * MINUTE, RunState.SUCCEEDED)
        [problem] = health_problems([locked("app:job", fixed_rate=60.0)], history, NOW)
        assert "no success within 2m" in problem.reason
        assert "09:02:00" in problem.reason

    def test_a_failure_in_the_last_day_is_reported_with_its_error(self) -> None:
        history = MemoryRunHistory()
        record(history, "app:job", NOW - 2 * MINUTE, RunState.SUCCEEDED)
        record(history, "app:job", NOW - MINUTE, RunState.FAILED, "KeyError: 'x'")
        record(history, "app:job", NOW - timedelta(hours=25), RunState.FAILED, "old")
        [problem] = health_problems([locked("app:job", fixed_rate=60.0)], history, NOW)
        assert "failed" in problem.reason
        assert "KeyError: 'x'" in problem.reason

    def test_an_expired_run_is_reported(self) -> None:
        history = MemoryRunHistory()
        record(history, "app:job", NOW - 2 * MINUTE, RunState.SUCCEEDED)
        record(history, "app:job", NOW - MINUTE, RunState.EXPIRED, "its node died")
        [problem] = health_problems([locked("app:job", fixed_rate=60.0)], history, NOW)
        assert problem.reason.startswith("expired")

    def test_a_timed_out_run_is_reported_with_its_error(self) -> None:
        history = MemoryRunHistory()
        record(history, "app:job", NOW - 2 * MINUTE, RunState.SUCCEEDED)
        record(history, "app:job", NOW - MINUTE, RunState.TIMED_OUT, "timed out after 30s")
        [problem] = health_problems([locked("app:job", fixed_rate=60.0)], history, NOW)
        assert problem.reason.startswith("timed_out at the fire of")
        assert problem.reason.endswith("timed out after 30s")

    def test_unlocked_tasks_and_unknown_tasks_are_not_checked(self) -> None:
        history = MemoryRunHistory()
        record(history, "app:gone", NOW - MINUTE, RunState.FAILED, "removed task")
        free = ScheduledDescriptor(target="app:free", fixed_rate=60.0)
        assert health_problems([free], history, NOW) == []


class TestJudgedOnceAFireWasDue:
    """A task is judged only once a fire was due since it was first seen."""

    def test_a_freshly_deployed_daily_task_is_not_red_before_its_first_fire(self) -> None:
        daily = locked("app:nightly", cron="0 3 * * *")
        seen = {"app:nightly": NOW - timedelta(hours=1)}  # deployed at 08:05, after 03:00
        assert health_problems([daily], MemoryRunHistory(), NOW, first_seen=seen) == []

    def test_it_is_red_once_a_fire_was_due_since_and_did_not_succeed(self) -> None:
        daily = locked("app:nightly", cron="0 3 * * *")
        seen = {"app:nightly": NOW - timedelta(hours=7)}  # deployed at 02:05: 03:00 was due
        [problem] = health_problems([daily], MemoryRunHistory(), NOW, first_seen=seen)
        assert problem.reason == "no successful run recorded"

    def test_a_fire_due_less_than_two_minutes_ago_is_not_judged_yet(self) -> None:
        rate = locked("app:job", fixed_rate=60.0)
        just = {"app:job": NOW - 2 * MINUTE}  # due a minute ago: may still be running
        assert health_problems([rate], MemoryRunHistory(), NOW, first_seen=just) == []
        later = {"app:job": NOW - 3 * MINUTE}
        assert len(health_problems([rate], MemoryRunHistory(), NOW, first_seen=later)) == 1

    def test_the_initial_delay_holds_the_first_due_fire_back(self) -> None:
        delayed = locked("app:job", fixed_rate=60.0, initial_delay=3600.0)
        seen = {"app:job": NOW - 30 * MINUTE}
        assert health_problems([delayed], MemoryRunHistory(), NOW, first_seen=seen) == []

    def test_a_failure_followed_by_a_success_is_no_problem(self) -> None:
        history = MemoryRunHistory()
        record(history, "app:job", NOW - 3 * MINUTE, RunState.FAILED, "transient 503")
        record(history, "app:job", NOW - 2 * MINUTE, RunState.SUCCEEDED)
        assert health_problems([locked("app:job", fixed_rate=60.0)], history, NOW) == []

    def test_a_failure_after_the_last_success_is_still_a_problem(self) -> None:
        history = MemoryRunHistory()
        record(history, "app:job", NOW - 2 * MINUTE, RunState.SUCCEEDED)
        record(history, "app:job", NOW - MINUTE, RunState.FAILED, "KeyError: 'x'")
        [problem] = health_problems([locked("app:job", fixed_rate=60.0)], history, NOW)
        assert "KeyError: 'x'" in problem.reason


class TestRunsTable:
    def test_rows_show_state_attempt_node_and_error(self) -> None:
        history = MemoryRunHistory()
        record(history, "app:job", NOW, RunState.FAILED, "ValueError: boom")
        history.skip("app:job", NOW + MINUTE, lock="app:job", node="n2", reason="3.0s late", at=NOW)
        output = io.StringIO()
        render_runs(history.runs(), Console(file=output, width=200))
        text = output.getvalue()
        assert text.index("skipped") < text.index("failed")  # newest first
        assert "ValueError: boom" in text
        assert "3.0s late" in text

    def test_an_empty_history_says_so(self) -> None:
        output = io.StringIO()
        render_runs([], Console(file=output), task="app:job")
        assert "no run recorded for app:job" in output.getvalue()


class TestDeploymentsSharingAHistory:
    """monitor judges a task by the fires of its own lock name only."""

    @staticmethod
    def _fire(
        history: MemoryRunHistory, descriptor: ScheduledDescriptor, ago: int, *, fails: bool
    ) -> None:
        def body() -> None:
            if fails:
                raise RuntimeError("staging database is down")

        FireRunner(InMemoryLock(), history=history, clock=lambda: NOW, node="n").run(
            Fire.at(descriptor, NOW - ago * MINUTE), body
        )

    def test_another_deployments_runs_neither_heal_nor_break_a_task(self) -> None:
        target = f"app.jobs_{uuid.uuid4().hex}:sync"
        production = ScheduledDescriptor(
            target=target, lock_name=f"prod:{target}", lock_ttl=30.0, fixed_rate=60.0
        )
        staging = ScheduledDescriptor(
            target=target, lock_name=f"staging:{target}", lock_ttl=30.0, fixed_rate=60.0
        )
        history = MemoryRunHistory()
        self._fire(history, staging, 2, fails=True)
        self._fire(history, staging, 1, fails=False)
        problems = health_problems([production], history, NOW)
        assert [p.reason for p in problems] == ["no successful run recorded"]
        self._fire(history, production, 1, fails=False)
        assert health_problems([production], history, NOW) == []


class TestRetriedFires:
    """`monitor` on a task with `retries=`, its records written by the fire runner."""

    def _runner(self, history: MemoryRunHistory, now: list[datetime]) -> FireRunner:
        return FireRunner(InMemoryLock(), history=history, clock=lambda: now[0])

    def test_a_failed_retry_is_reported_as_retry_k_of_n(self) -> None:
        task = replace(locked("app:retried", fixed_rate=3600.0), retries=1, retry_backoff=1.0)
        history = MemoryRunHistory()
        record(history, "app:retried", NOW - 70 * MINUTE, RunState.SUCCEEDED)
        instant = NOW - 10 * MINUTE
        now = [instant]
        runner = self._runner(history, now)

        def body() -> None:
            raise RuntimeError("boom")

        failed = runner.run(Fire.at(task, instant), body)
        assert failed.retry is not None
        now[0] = failed.retry.due
        assert runner.run(failed.retry, body).retry is None  # the last retry failed
        [problem] = health_problems([task], history, NOW)
        assert "(attempt 2 on " in problem.reason
        assert problem.reason.endswith("retry 1 of 1; RuntimeError: boom")

    def test_a_retry_that_succeeded_clears_the_failure(self) -> None:
        task = replace(locked("app:recovered", fixed_rate=3600.0), retries=2, retry_backoff=1.0)
        history = MemoryRunHistory()
        record(history, "app:recovered", NOW - 70 * MINUTE, RunState.SUCCEEDED)
        instant = NOW - 10 * MINUTE
        now = [instant]
        runner = self._runner(history, now)
        runs: list[int] = []

        def body() -> None:
            runs.append(1)
            if len(runs) == 1:
                raise RuntimeError("boom")

        failed = runner.run(Fire.at(task, instant), body)
        assert failed.retry is not None
        [problem] = health_problems([task], history, NOW)  # failed, its retry pending
        assert "retry 1 of 2 due" in problem.reason
        now[0] = failed.retry.due
        runner.run(failed.retry, body)
        assert health_problems([task], history, NOW) == []
