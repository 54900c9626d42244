"""A saturated node says once in a while that it passes fires over, not once per job.

Found by profiling `benchmarks/fire_cost.py`: a PostgreSQL node running
200 one-second tasks alone fell behind, and APScheduler then logged one warning per
job and per second ("Execution of job ... skipped: maximum number of running
instances reached"). Formatting those lines (each renders the job's trigger and next
run time) took 24 % of the node's CPU samples, which made it fall further behind.
The resident host now gives its scheduler a logger of its own that drops that line,
and says it itself, at most once per `PASSED_OVER_REPORT_SECONDS`: how many fires of
how many tasks were passed over. The fires themselves are still recorded as skipped
where a run history is kept (`test_host_passed_over_fires.py`).
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.hosts.observation.passed_over_report import (
    PassedOverReport,
    scheduler_logger,
)
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.boot import build_runtime

MODULE = "firefly_host_unit_tasks"


def test_passed_over_fires_are_summarised_not_logged_per_job(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tasks.reset()
    monkeypatch.setattr(tasks, "SLOW_SECONDS", 0.45)
    descriptors = [
        ScheduledDescriptor(
            target=f"{MODULE}:slow", fixed_rate=0.1, lock_name=f"summary-{n}", lock_ttl=5.0
        )
        for n in range(3)
    ]
    runtime = build_runtime(descriptors, Settings(lock_provider="memory"), host="run", node="unit")
    host = ResidentHost(descriptors, runtime, grace_period=5.0)
    caplog.set_level(logging.INFO)
    host.start()
    try:
        time.sleep(2.0)
    finally:
        assert host.shutdown() == 0
    assert len(tasks.calls("slow")) >= 3  # each task ran, and passed fires over meanwhile
    tasks.reset()
    per_job = [r for r in caplog.records if "maximum number of running" in r.getMessage()]
    assert per_job == []
    summaries = [r for r in caplog.records if "passed over on this node" in r.getMessage()]
    # Three tasks each passing over about 4 of every 5 fires for 2 s: dozens of fires,
    # and one line saying so (the first; the next is due a minute later).
    assert len(summaries) == 1, [r.getMessage() for r in summaries]
    assert summaries[0].levelno == logging.WARNING
    assert summaries[0].name == "firefly_scheduling.hosts"
    assert summaries[0].args is not None
    fires, task_count = summaries[0].args[:2]  # type: ignore[index]
    assert task_count >= 1
    assert fires >= task_count


def test_the_report_logs_at_once_then_once_per_interval_with_the_counts_since(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    report = PassedOverReport(interval=60.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING, logger="firefly_scheduling.hosts")
    report.add("app:a", 2)
    now[0] += 10
    report.add("app:a", 3)
    report.add("app:b", 1)
    now[0] += 55
    report.add("app:c", 4)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0].startswith("2 fire(s) of 1 task(s) passed over on this node:")
    assert messages[1].startswith(
        "8 fire(s) of 3 task(s) passed over on this node in the last 65 s:"
    )


def test_only_the_max_instances_line_of_a_host_scheduler_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="apscheduler")  # the CLI's tests raise it to WARNING
    named = scheduler_logger()
    line = 'Execution of job "%s" skipped: maximum number of running instances reached (%d)'
    named.warning(line, "firefly-job", 1)
    named.info("Scheduler started")
    named.warning("Error getting due jobs from job store %r: %s", "default", "boom")
    logging.getLogger("apscheduler.scheduler").warning(line, "app-job", 1)
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("apscheduler.scheduler", logging.INFO, "Scheduler started"),
        (
            "apscheduler.scheduler",
            logging.WARNING,
            "Error getting due jobs from job store 'default': boom",
        ),
        (
            "apscheduler.scheduler",
            logging.WARNING,
            'Execution of job "app-job" skipped: maximum number of running instances reached (1)',
        ),
    ]
    # The caller named is the scheduler's code, not the adapter's.
    assert (
        caplog.records[1].funcName
        == "test_only_the_max_instances_line_of_a_host_scheduler_is_dropped"
    )
