"""Runtime schedules: `@schedulable`, the checks at add time and on a node, the watch."""

from __future__ import annotations

import logging
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from firefly_scheduling import ConfigurationError, ScheduledManifest, schedulable
from firefly_scheduling.control import RuntimeSchedule, ScheduleConflict
from firefly_scheduling.control.memory import MemoryControlStore
from firefly_scheduling.control.runtime_schedules import (
    add_runtime_schedule,
    remove_runtime_schedule,
    runtime_schedules,
)
from firefly_scheduling.control.runtime_tasks import runtime_descriptor, runtime_task
from firefly_scheduling.fires.outcome import TriggerKind
from firefly_scheduling.hosts.apscheduler.jobs import RecurringFire, trigger_for
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.runtime.schedule_watch import (
    RUNTIME_JOB_PREFIX,
    RuntimeScheduleSource,
    RuntimeScheduleWatch,
)
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.discovery import runtime_targets
from firefly_scheduling.tasks.scanner import scan, scan_schedulable
from firefly_scheduling.tasks.schedulable import schedulable_target_of

MakePackage = Callable[[str], str]

APP = """
    import time

    from firefly_scheduling import schedulable, scheduled

    @schedulable
    def report():
        pass

    @scheduled(fixed_rate="1h")
    def nightly():
        pass

    def not_allowed():
        pass

    class Jobs:
        @schedulable()
        def rebuild(self):
            pass

    SPANS = []

    @schedulable
    def slow():
        start = time.monotonic()
        time.sleep(1.2)
        SPANS.append((start, time.monotonic()))
"""


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package `<name>.jobs` holding APP; its name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"runtimeapp_{uuid.uuid4().hex[:12]}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "jobs.py").write_text(textwrap.dedent(APP))
    yield name
    for module in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[module]


def test_schedulable_marks_the_function_with_its_target_and_returns_it(app: str) -> None:
    jobs = __import__(f"{app}.jobs", fromlist=["jobs"])
    assert schedulable_target_of(jobs.report) == f"{app}.jobs:report"
    assert schedulable_target_of(jobs.Jobs.rebuild) == f"{app}.jobs:Jobs.rebuild"
    assert schedulable_target_of(jobs.not_allowed) is None
    assert schedulable(jobs.not_allowed) is jobs.not_allowed  # returned unchanged

    def inner() -> None: ...

    with pytest.raises(ConfigurationError, match=r"<locals>|not importable"):
        schedulable(inner)
    with pytest.raises(ConfigurationError, match="decorates a function"):
        schedulable(42)  # type: ignore[call-overload]


def test_scan_finds_schedulable_callables_and_the_manifest_keeps_them(
    app: str, tmp_path: Path
) -> None:
    allowed = scan_schedulable([app])
    assert allowed == [f"{app}.jobs:Jobs.rebuild", f"{app}.jobs:report", f"{app}.jobs:slow"]
    path = tmp_path / "scheduled.json"
    ScheduledManifest.compile(scan([app]), path, packages=[app], schedulable=allowed)
    loaded = ScheduledManifest.load(path)
    assert loaded.schedulable == tuple(allowed)
    assert loaded.stale_reason(scan([app]), allowed) is None
    assert "@schedulable removed" in (loaded.stale_reason(scan([app]), allowed[:1]) or "")
    from_manifest = runtime_targets(Settings(manifest_path=path))
    assert from_manifest == {*allowed, f"{app}.jobs:nightly"}
    assert runtime_targets(Settings(manifest_path=tmp_path / "none.json"), packages=[app]) == (
        from_manifest
    )


def test_a_runtime_schedule_is_read_as_the_decorator_reads_its_arguments(app: str) -> None:
    allowed = runtime_targets(Settings(), packages=[app])
    descriptor = runtime_descriptor(
        "reports-every-minute", f"{app}.jobs:report", {"fixed_rate": "1m"}, allowed=allowed
    )
    assert descriptor == ScheduledDescriptor(
        target=f"{app}.jobs:report",
        fixed_rate=60.0,
        lock_name="reports-every-minute",  # lock=True names the lock after the schedule
        lock_ttl=30.0,
    )
    refusals = {
        "not schedulable": ("x", f"{app}.jobs:not_allowed", {"cron": "* * * * *"}),
        "is not importable": ("x", "os.system", {"cron": "* * * * *"}),
        "bad-cron": ("x", f"{app}.jobs:report", {"cron": "bad-cron"}),
        "'5x'": ("x", f"{app}.jobs:report", {"fixed_rate": "5x"}),
        "exactly one of": ("x", f"{app}.jobs:report", {}),
        "unknown argument": ("x", f"{app}.jobs:report", {"cronn": "* * * * *"}),
        "catchup": ("x", f"{app}.jobs:report", {"cron": "* * * * *", "catchup": "1h"}),
        "is the target of": (f"{app}.jobs:nightly", f"{app}.jobs:report", {"cron": "* * * * *"}),
        r"reserved|must not be": ("firefly:x", f"{app}.jobs:report", {"cron": "* * * * *"}),
    }
    for expected, (name, target, arguments) in refusals.items():
        with pytest.raises(ConfigurationError, match=expected):
            runtime_descriptor(name, target, arguments, allowed=allowed)


def test_adding_the_same_schedule_twice_stores_one_and_other_arguments_conflict(app: str) -> None:
    allowed = runtime_targets(Settings(), packages=[app])
    store = MemoryControlStore()
    target = f"{app}.jobs:report"
    assert add_runtime_schedule(store, "r", target, by="ops", allowed=allowed, cron="*/5 * * * *")
    assert not add_runtime_schedule(
        store, "r", target, by="ops", allowed=allowed, cron="*/5 * * * *"
    )
    assert [s.name for s in runtime_schedules(store)] == ["r"]
    with pytest.raises(ScheduleConflict, match="'r' already exists"):
        add_runtime_schedule(store, "r", target, by="ops", allowed=allowed, cron="* * * * *")
    with pytest.raises(ConfigurationError, match="not schedulable"):
        add_runtime_schedule(
            store, "s", f"{app}.jobs:not_allowed", by="ops", allowed=allowed, cron="* * * * *"
        )
    assert remove_runtime_schedule(store, "r")
    assert not remove_runtime_schedule(store, "r")
    assert runtime_schedules(store) == []


def test_a_node_refuses_a_stored_record_the_code_does_not_allow(app: str) -> None:
    allowed = runtime_targets(Settings(), packages=[app])
    written_directly = RuntimeSchedule(
        name="sneaky",
        descriptor=ScheduledDescriptor(target="os:system", cron="* * * * *"),
        by="someone with store access",
        added_at=0.0,
    )
    with pytest.raises(ConfigurationError, match="'os:system' is not schedulable"):
        runtime_task(written_directly, allowed)
    accepted = runtime_task(
        RuntimeSchedule(
            "fine",
            ScheduledDescriptor(target=f"{app}.jobs:report", cron="* * * * *", lock_name="fine"),
            "ops",
            0.0,
        ),
        allowed,
    )
    assert accepted.task.target == "fine"  # recorded and claimed under the schedule's name
    assert accepted.callable_target == f"{app}.jobs:report"


def test_the_watch_adds_replaces_and_removes_jobs_and_ignores_refused_records(
    app: str, caplog: pytest.LogCaptureFixture
) -> None:
    allowed = runtime_targets(Settings(), packages=[app])
    store = MemoryControlStore()
    runtime = build_runtime((), Settings(), host="run", lock=InMemoryLock(), eager=False)
    scheduler = BackgroundScheduler()
    watch = RuntimeScheduleWatch(scheduler, runtime, RuntimeScheduleSource(store, allowed))
    add_runtime_schedule(
        store, "r", f"{app}.jobs:report", by="ops", allowed=allowed, cron="* * * * *"
    )
    # Written past the checks, as a second client of the store could.
    store.add_schedule(
        "evil", ScheduledDescriptor(target=f"{app}.jobs:not_allowed", cron="* * * * *"), by="x"
    )
    with caplog.at_level(logging.ERROR, logger="firefly_scheduling.hosts"):
        watch.refresh()
        watch.refresh()  # said once, not at every read
    assert [job.id for job in scheduler.get_jobs()] == [RUNTIME_JOB_PREFIX + "r"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "'evil' ignored" in errors[0]
    assert "not_allowed' is not schedulable" in errors[0]
    job = scheduler.get_job(RUNTIME_JOB_PREFIX + "r")
    assert isinstance(job.func, RecurringFire)
    assert job.func.fire_at(job.func.due_instant()).trigger is TriggerKind.RUNTIME
    assert job.func.descriptor.target == "r"
    assert runtime.callables.resolve("r") is sys.modules[f"{app}.jobs"].report

    remove_runtime_schedule(store, "r")
    add_runtime_schedule(
        store, "r", f"{app}.jobs:Jobs.rebuild", by="ops", allowed=allowed, fixed_rate="10s"
    )
    watch.refresh()
    replaced = scheduler.get_job(RUNTIME_JOB_PREFIX + "r")
    assert replaced.func.descriptor.fixed_rate == 10.0
    remove_runtime_schedule(store, "r")
    watch.refresh()
    assert scheduler.get_jobs() == []
    runtime.close()


def test_a_node_with_one_task_of_its_own_runs_two_runtime_schedules_side_by_side(
    app: str,
) -> None:
    """The resident host's pool is sized at boot: runtime schedules must not queue
    behind each other in a pool made for the code's one task."""
    allowed = runtime_targets(Settings(), packages=[app])
    store = MemoryControlStore()
    for name in ("slow-a", "slow-b"):
        add_runtime_schedule(
            store, name, f"{app}.jobs:slow", by="ops", allowed=allowed, fixed_rate="2s"
        )
    code_tasks = scan([app])
    runtime = build_runtime(code_tasks, Settings(), host="run", lock=InMemoryLock(), eager=False)
    host = ResidentHost(code_tasks, runtime, control=store, runtime_targets=allowed)
    host.start()
    try:
        time.sleep(4.5)
    finally:
        host.shutdown()
    spans = sys.modules[f"{app}.jobs"].SPANS
    assert len(spans) >= 2
    first, second, *_ = sorted(spans)
    assert second[0] < first[1], f"the two schedules' bodies ran one after the other: {spans}"


def test_a_runtime_schedule_added_again_records_nothing_for_the_time_it_was_gone(
    app: str,
) -> None:
    """A job's first run in a process records the unrecorded instants behind the task's
    newest record as fires nobody ran; a runtime schedule re-added an hour after its
    removal has no such fires: it was not defined meanwhile."""
    settings = Settings(lock_provider="memory", history_url="memory://")
    descriptor = replace(
        runtime_descriptor(
            "again", f"{app}.jobs:report", {"fixed_rate": "1m"}, allowed={f"{app}.jobs:report"}
        ),
        target="again",
    )
    runtime = build_runtime([], settings, host="run", lock=InMemoryLock(), eager=False)
    runtime.callables.alias("again", f"{app}.jobs:report")
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    for offset in (timedelta(0), timedelta(hours=1)):  # added, removed, added again
        runtime.now = lambda offset=offset: start + offset + timedelta(seconds=1)
        job = RecurringFire(descriptor, trigger_for(descriptor), runtime, kind=TriggerKind.RUNTIME)
        job()
    history = runtime.fire_runner.get().history
    assert history is not None
    records = history.runs("again", 1000)
    assert [(r.state.value, r.instant) for r in records] == [
        ("succeeded", start + timedelta(hours=1)),
        ("succeeded", start),
    ]
    runtime.close()
