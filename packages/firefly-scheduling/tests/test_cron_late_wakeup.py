"""A cron fire is always named by a scheduled instant, however late the wake-up.

A job that wakes up more than a period late (a weekly task on a Wednesday, a process
suspended for days) used to name its fire after the current minute and run there,
at a time its schedule does not have. It must name the true latest scheduled instant,
which the fire runner's grace rule then records as skipped (too late).
"""

from __future__ import annotations

import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.fires.outcome import FireResult, Verdict
from firefly_scheduling.history.port import RunState
from firefly_scheduling.hosts.apscheduler.jobs import RecurringFire, trigger_for
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.fire_instants import cron_fire_at_or_before

MODULE = "firefly_host_unit_tasks"
SUNDAY_0300 = datetime(2026, 3, 1, 3, 0, tzinfo=UTC)
WEDNESDAY_1234 = datetime(2026, 3, 4, 12, 34, 56, tzinfo=UTC)


class Recorder:
    def __init__(self) -> None:
        self.results: list[FireResult] = []
        self._mutex = threading.Lock()

    def fire_finished(self, result: FireResult) -> None:
        with self._mutex:
            self.results.append(result)


def test_a_weekly_task_woken_on_a_wednesday_names_last_sundays_fire() -> None:
    schedule = CronSchedule.parse("0 3 * * 0", None, source="test")
    assert cron_fire_at_or_before(schedule, WEDNESDAY_1234) == SUNDAY_0300


def test_the_resident_job_woken_late_records_the_scheduled_fire_as_too_late() -> None:
    tasks.reset()
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:ping", cron="0 3 * * 0", lock_name="weekly", lock_ttl=30.0
    )
    recorder = Recorder()
    runtime = build_runtime(
        [descriptor],
        Settings(lock_provider="memory", history_url="memory://"),
        host="run",
        node="unit",
        observers=[recorder],
    )
    runtime.now = lambda: WEDNESDAY_1234  # the clock seam: the job wakes on a Wednesday
    try:
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        [result] = recorder.results
        assert result.fire.instant == SUNDAY_0300
        assert result.verdict is Verdict.TOO_LATE
        assert tasks.calls("ping") == []
        history = runtime.fire_runner.get().history
        assert history is not None
        [record] = history.runs(descriptor.target)
        assert record.state is RunState.SKIPPED
        assert record.instant == SUNDAY_0300
        assert "late" in (record.error or "")
    finally:
        runtime.close()
        tasks.reset()


@pytest.mark.parametrize(
    ("expression", "zone", "now", "expected"),
    [
        # A monthly task, three weeks late.
        ("0 0 1 * *", None, datetime(2026, 3, 22, 8, 0), datetime(2026, 3, 1, 0, 0)),
        # Leap day only: the latest one is two years back.
        ("0 0 29 2 *", None, datetime(2026, 3, 4, 12, 0), datetime(2024, 2, 29, 0, 0)),
        # The zone's Sunday 03:00 is 08:00 UTC in New York's winter.
        ("0 3 * * 0", "America/New_York", WEDNESDAY_1234, datetime(2026, 3, 1, 8, 0)),
        # 02:30 falls in Paris's spring-forward gap: that fire ran at 03:00 CEST (01:00 UTC).
        ("30 2 * * *", "Europe/Paris", datetime(2026, 3, 29, 1, 30), datetime(2026, 3, 29, 1, 0)),
        # Hourly at :30 across the autumn fall-back: the second 02:30 (01:30 UTC) ran too.
        (
            "30 * * * *", "Europe/Paris",
            datetime(2026, 10, 25, 1, 59), datetime(2026, 10, 25, 1, 30),
        ),
        # The fire itself, to the second, is its own latest fire.
        ("0 3 * * 0", None, SUNDAY_0300, SUNDAY_0300),
    ],
)  # fmt: skip
def test_the_latest_fire_is_found_however_far_back(
    expression: str, zone: str | None, now: datetime, expected: datetime
) -> None:
    schedule = CronSchedule.parse(expression, zone, source="test")
    now, expected = now.replace(tzinfo=UTC), expected.replace(tzinfo=UTC)
    assert cron_fire_at_or_before(schedule, now) == expected
    assert schedule.latest_at_or_before(now) == expected


EXPRESSIONS = [
    "0 3 * * 0",
    "30 2 * * *",
    "*/7 * * * *",
    "30 * * * *",
    "0 0 1 * *",
    "15 1,2,3 * * 1-5",
    "0 0 29 2 *",
    "0 12 13 * 5",
]
ZONES = [None, "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]


@settings(deadline=None, max_examples=300)  # a loaded machine must not fail a logic test
@given(
    expression=st.sampled_from(EXPRESSIONS),
    zone=st.sampled_from(ZONES),
    now=st.datetimes(
        min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
    ),
)
def test_the_fire_named_is_a_scheduled_instant_with_none_between_it_and_now(
    expression: str, zone: str | None, now: datetime
) -> None:
    schedule = CronSchedule.parse(expression, zone, source="test")
    fire = cron_fire_at_or_before(schedule, now)
    assert fire <= now
    assert schedule.next_after(fire - timedelta(microseconds=1)) == fire  # it is a fire
    assert schedule.next_after(fire) > now  # and the latest one
