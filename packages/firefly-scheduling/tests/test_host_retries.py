"""Retries on the hosts: `tick` runs them inline in its pass; the APScheduler hosts
(library, resident, asyncio) add a one-shot job per retry. Each body records the fire's
instant and attempt itself (`firefly_host_unit_tasks.flaky`)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks
from firefly_fake_clock import FakeClock

from firefly_scheduling import InMemoryLock, ScheduledDescriptor, Settings, register
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.fires.outcome import TriggerKind, Verdict
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.tick import TickHost

MODULE = "firefly_host_unit_tasks"
MINUTE = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)
MEMORY = Settings(lock_provider="memory")


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    tasks.reset()
    yield
    tasks.reset()


def flaky_task(lock: str, **schedule: object) -> ScheduledDescriptor:
    return ScheduledDescriptor(
        target=f"{MODULE}:flaky",
        lock_name=lock,
        lock_ttl=5.0,
        retries=3,
        retry_backoff=0.2,
        retry_backoff_max=0.4,
        **schedule,  # type: ignore[arg-type]
    )


def tick(descriptors: list[ScheduledDescriptor]) -> TickHost:
    runtime = build_runtime(descriptors, MEMORY, host="tick", node="t")
    return TickHost(descriptors, runtime, clock=FakeClock(MINUTE))


class TestTick:
    def test_runs_a_fire_s_retries_in_its_pass_until_one_succeeds(self) -> None:
        tasks.FLAKY_FAILURES = 2
        report = tick([flaky_task("tick-flaky", cron="* * * * *")]).run()
        assert tasks.ATTEMPTS == [(MINUTE, 1), (MINUTE, 2), (MINUTE, 3)]
        assert [(r.verdict, r.fire.trigger) for r in report.results] == [
            (Verdict.FAILED, TriggerKind.SCHEDULED),
            (Verdict.FAILED, TriggerKind.RETRY),
            (Verdict.SUCCEEDED, TriggerKind.RETRY),
        ]
        assert report.exit_status == 0  # each failure was followed by its retry

    def test_exits_1_when_the_last_retry_failed(self) -> None:
        tasks.FLAKY_FAILURES = 10
        report = tick([flaky_task("tick-failing", cron="* * * * *")]).run()
        assert [attempt for _, attempt in tasks.ATTEMPTS] == [1, 2, 3, 4]
        assert report.results[-1].retry is None
        assert report.exit_status == 1
        assert report.problems() == [report.results[-1]]

    def test_a_stop_request_drops_the_retries_not_started(self) -> None:
        tasks.FLAKY_FAILURES = 10
        host = tick([flaky_task("tick-stopped", cron="* * * * *")])
        host.stop.request()  # asked to stop before the pass: no slot starts at all
        report = host.run()
        assert tasks.ATTEMPTS == []
        assert report.stopped


def first_fire_attempts() -> list[tuple[datetime, int]]:
    """The runs `flaky` recorded of the first fire it ran (a 2 s task fires again)."""
    attempts = list(tasks.ATTEMPTS)
    return [each for each in attempts if each[0] == attempts[0][0]] if attempts else []


def wait_for(condition: object, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not condition():  # type: ignore[operator]
        time.sleep(0.02)


class TestTheApschedulerHosts:
    """A 2 s task: its first fire fails, and its retries (due within 0.2 s to 0.4 s of
    each failure) run before its next fire."""

    def test_a_threaded_scheduler_runs_each_retry_as_a_job_of_its_own(self) -> None:
        tasks.FLAKY_FAILURES = 2
        scheduler = BackgroundScheduler(timezone="UTC")
        task = flaky_task("lib-flaky", fixed_rate=2.0)
        register(scheduler, descriptors=[task], lock=InMemoryLock(), settings=MEMORY)
        scheduler.start()
        try:
            wait_for(lambda: len(first_fire_attempts()) >= 3, 10.0)
        finally:
            scheduler.shutdown(wait=True)
        instant = tasks.ATTEMPTS[0][0]
        assert first_fire_attempts() == [(instant, 1), (instant, 2), (instant, 3)]

    def test_an_asyncio_scheduler_runs_each_retry_as_a_job_of_its_own(self) -> None:
        tasks.FLAKY_FAILURES = 1

        async def scenario() -> None:
            scheduler = AsyncIOScheduler(timezone="UTC")
            task = flaky_task("aio-flaky", fixed_rate=2.0)
            register(scheduler, descriptors=[task], lock=AsyncInMemoryLock(), settings=MEMORY)
            scheduler.start()
            try:
                for _ in range(500):
                    if len(first_fire_attempts()) >= 2:
                        break
                    await asyncio.sleep(0.02)
            finally:
                scheduler.shutdown(wait=False)

        asyncio.run(scenario())
        instant = tasks.ATTEMPTS[0][0]
        assert first_fire_attempts() == [(instant, 1), (instant, 2)]
