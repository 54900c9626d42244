"""`register(scheduler)`: the library host on an application's own APScheduler."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks

from firefly_scheduling import (
    ConfigurationError,
    InMemoryLock,
    ScheduledDescriptor,
    Settings,
    register,
)
from firefly_scheduling.schedule.jitter import jitter_offset

MODULE = "firefly_host_unit_tasks"
BROKEN = Settings(lock_provider="does-not-exist")


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    tasks.reset()
    yield
    tasks.reset()


@pytest.fixture
def scheduler() -> Iterator[BackgroundScheduler]:
    instance = BackgroundScheduler(timezone="UTC")
    yield instance
    if instance.running:
        instance.shutdown(wait=True)


def run_for(scheduler: BackgroundScheduler, seconds: float) -> None:
    scheduler.start()
    time.sleep(seconds)
    scheduler.shutdown(wait=True)


def test_registration_is_lazy_and_an_explicit_lock_wins(scheduler: BackgroundScheduler) -> None:
    task = ScheduledDescriptor(
        target=f"{MODULE}:ping", fixed_rate=0.1, lock_name="lib", lock_ttl=5.0
    )
    job_ids = register(scheduler, descriptors=[task], lock=InMemoryLock(), settings=BROKEN)
    assert [job.id for job in scheduler.get_jobs()] == job_ids
    assert tasks.calls("ping") == []
    run_for(scheduler, 0.5)
    assert tasks.calls("ping")


def test_the_configured_provider_is_only_built_on_the_first_fire(
    scheduler: BackgroundScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    task = ScheduledDescriptor(
        target=f"{MODULE}:ping", fixed_rate=0.1, lock_name="lib", lock_ttl=5.0
    )
    register(scheduler, descriptors=[task], settings=BROKEN)  # no error yet: nothing is built
    assert "does-not-exist" not in caplog.text
    run_for(scheduler, 0.35)
    assert tasks.calls("ping") == []  # never unlocked because the provider is broken
    assert "unknown lock provider 'does-not-exist'" in caplog.text


def test_a_resolver_supplies_the_instance_of_a_method_task(scheduler: BackgroundScheduler) -> None:
    task = ScheduledDescriptor(target=f"{MODULE}:Service.work", fixed_rate=0.1)
    register(
        scheduler,
        descriptors=[task],
        resolver=lambda cls: cls("from-container"),
        settings=Settings(),
    )
    run_for(scheduler, 0.35)
    assert tasks.calls("work:from-container")
    assert tasks.calls("work:default") == []


def test_tasks_are_validated_when_registered(scheduler: BackgroundScheduler) -> None:
    bad = ScheduledDescriptor(target=f"{MODULE}:ping", cron="61 * * * *")
    with pytest.raises(ConfigurationError, match=f"{MODULE}:ping"):
        register(scheduler, descriptors=[bad], settings=Settings())
    assert scheduler.get_jobs() == []


def test_without_descriptors_the_configured_packages_are_scanned(
    scheduler: BackgroundScheduler, tmp_path: Path
) -> None:
    settings = Settings(
        scan_packages=("firefly_host_unit_app",), manifest_path=tmp_path / "none.json"
    )
    [job_id] = register(scheduler, settings=settings)
    assert job_id.endswith("firefly_host_unit_app:heartbeat")
    run_for(scheduler, 0.5)
    assert tasks.calls("ping")


def test_a_jittered_task_starts_each_fire_after_its_offset(scheduler: BackgroundScheduler) -> None:
    task = ScheduledDescriptor(
        target=f"{MODULE}:stamped", fixed_rate=0.5, jitter=0.4, lock_name="jit", lock_ttl=5.0
    )
    register(scheduler, descriptors=[task], lock=InMemoryLock(), settings=BROKEN)
    run_for(scheduler, 2.5)
    assert len(tasks.STAMPED) >= 2
    for instant, started in tasks.STAMPED:
        # Named by its instant, started (by the body's own reading of the clock) after
        # the instant plus its offset.
        assert instant.microsecond % 500_000 == 0
        due = instant + jitter_offset(task.target, instant, 0.4)
        assert started >= due.timestamp()
