"""Defaults that keep the promise "at most one node".

* `@scheduled` locks by default; `lock=False` runs on every node, `schedule` says so,
  and `FIREFLY_SCHEDULING_LOCK_REQUIRED` refuses such a task at boot by name.
* `resolve_lock()` / `resolve_async_lock()` on the default `none` provider warn once,
  and refuse under `LOCK_REQUIRED`.
* Tasks that share a lock name draw a boot warning naming both, and a fire skipped
  because another task holds the shared lock says which one.
"""

from __future__ import annotations

import json
import logging
import textwrap
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from firefly_scheduling import (
    ConfigurationError,
    InMemoryLock,
    ScheduledDescriptor,
    Settings,
    resolve_lock,
    scheduled,
)
from firefly_scheduling.aio import resolve_async_lock
from firefly_scheduling.cli import main
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.locks import providers as lock_providers
from firefly_scheduling.tasks.decorator import descriptor_of

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def define(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "app.tasks", "scheduled": scheduled}
    exec(textwrap.dedent(source), namespace)
    return namespace


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for variable in (
        "FIREFLY_SCAN_PACKAGES",
        "FIREFLY_SCHEDULING_LOCK_PROVIDER",
        "FIREFLY_SCHEDULING_LOCK_REQUIRED",
    ):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("FIREFLY_SCHEDULING_MANIFEST", str(tmp_path / "absent.json"))
    return tmp_path


# -- lock=True is the default ----------------------------------------------------------


def test_a_task_without_lock_is_locked_under_its_own_target() -> None:
    tasks = define(
        """
        @scheduled(fixed_rate="2s")
        def refresh(): ...
        """
    )
    descriptor = descriptor_of(tasks["refresh"])
    assert descriptor is not None
    assert descriptor.lock_name == "app.tasks:refresh"
    assert descriptor.lock_ttl == 30.0


def test_lock_false_runs_on_every_node_and_schedule_says_so(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = clean_env / "pkg_everywhere"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tasks.py").write_text(
        "from firefly_scheduling import scheduled\n\n"
        "@scheduled(fixed_rate='2s', lock=False)\n"
        "def local_cache_sweep(): ...\n"
    )
    arguments = ["schedule", "--path", str(clean_env), "--app", "pkg_everywhere"]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    assert "every node" in result.output
    as_json = CliRunner().invoke(main, [*arguments, "--json"])
    [row] = [json.loads(line) for line in as_json.output.splitlines()]
    assert row["lock"] is None
    assert row["runs_on"] == "every node"


def test_lock_required_refuses_an_unlocked_task_by_name() -> None:
    unlocked = ScheduledDescriptor(target="app.tasks:local_cache_sweep", fixed_rate=2.0)
    locked = ScheduledDescriptor(
        target="app.tasks:report", fixed_rate=2.0, lock_name="app.tasks:report", lock_ttl=30.0
    )
    settings = Settings(lock_provider="memory", lock_required=True)
    with pytest.raises(ConfigurationError) as refused:
        # Even with a lock handed in explicitly: the task itself takes no lock at all.
        build_runtime([locked, unlocked], settings, host="run", lock=InMemoryLock(), node="n")
    message = str(refused.value)
    assert "app.tasks:local_cache_sweep" in message
    assert "app.tasks:report" not in message
    assert "FIREFLY_SCHEDULING_LOCK_REQUIRED" in message


def test_lock_required_refusal_of_an_unlocked_task_exits_2(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = clean_env / "pkg_unlocked_required"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tasks.py").write_text(
        "from firefly_scheduling import scheduled\n\n"
        "@scheduled(fixed_rate='2s', lock=False)\n"
        "def everywhere(): ...\n"
    )
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_REQUIRED", "true")
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_PROVIDER", "memory")
    arguments = ["tick", "--path", str(clean_env), "--app", "pkg_unlocked_required"]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 2, result.output
    assert "pkg_unlocked_required.tasks:everywhere" in result.output


# -- resolve_lock() with no provider ---------------------------------------------------


@pytest.fixture
def fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees the once-per-process warning afresh."""
    monkeypatch.setattr(lock_providers, "_warned_no_provider", threading.Event())


@pytest.mark.usefixtures("fresh_warning")
def test_resolve_lock_without_a_provider_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling"):
        resolve_lock(Settings())
        resolve_lock(Settings())
        resolve_async_lock(Settings())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "FIREFLY_SCHEDULING_LOCK_PROVIDER" in warnings[0]
    assert "every caller" in warnings[0]


@pytest.mark.usefixtures("fresh_warning")
def test_resolve_lock_without_a_provider_is_refused_when_a_lock_is_required() -> None:
    with pytest.raises(ConfigurationError, match="FIREFLY_SCHEDULING_LOCK_REQUIRED"):
        resolve_lock(Settings(lock_required=True))
    with pytest.raises(ConfigurationError, match="FIREFLY_SCHEDULING_LOCK_REQUIRED"):
        resolve_async_lock(Settings(lock_required=True))


@pytest.mark.usefixtures("fresh_warning")
def test_a_configured_provider_draws_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling"):
        resolve_lock(Settings(lock_provider="memory"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- shared lock names -----------------------------------------------------------------


def test_tasks_sharing_a_lock_name_draw_a_boot_warning_naming_both(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shared = f"shared-{uuid.uuid4().hex}"
    first = ScheduledDescriptor(
        target="app.tasks:export", fixed_rate=2.0, lock_name=shared, lock_ttl=30.0
    )
    second = ScheduledDescriptor(
        target="app.tasks:import_", fixed_rate=2.0, lock_name=shared, lock_ttl=30.0
    )
    alone = ScheduledDescriptor(
        target="app.tasks:alone", fixed_rate=2.0, lock_name="app.tasks:alone", lock_ttl=30.0
    )
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling"):
        runtime = build_runtime(
            [first, second, alone], Settings(lock_provider="memory"), host="run", node="n"
        )
    runtime.close()
    warnings = [r.getMessage() for r in caplog.records if shared in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "app.tasks:export" in warnings[0]
    assert "app.tasks:import_" in warnings[0]
    assert "app.tasks:alone" not in warnings[0]


def test_a_skip_on_a_shared_lock_names_the_task_that_holds_it() -> None:
    shared = f"shared-{uuid.uuid4().hex}"
    holder = ScheduledDescriptor(
        target="app.tasks:export", fixed_delay=60.0, lock_name=shared, lock_ttl=30.0
    )
    starved = ScheduledDescriptor(
        target="app.tasks:import_", fixed_delay=60.0, lock_name=shared, lock_ttl=30.0
    )
    history = MemoryRunHistory()
    runner = FireRunner(InMemoryLock(), history=history, clock=lambda: T0, node="n1")
    inside, leave = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        inside.set()
        leave.wait(10)

    background = threading.Thread(target=runner.run, args=(Fire.at(holder, T0), hold_the_lock))
    background.start()
    try:
        assert inside.wait(10)
        result = runner.run(Fire.at(starved, T0), lambda: None)
    finally:
        leave.set()
        background.join(10)
    assert result.verdict is Verdict.OVERLAPPING
    [record] = history.runs("app.tasks:import_", lock=shared)
    assert record.error is not None
    assert "app.tasks:export" in record.error
    assert "previous fire" not in record.error


def test_a_skip_on_a_shared_lock_held_elsewhere_does_not_blame_the_previous_fire() -> None:
    shared = f"shared-{uuid.uuid4().hex}"
    starved = ScheduledDescriptor(
        target="app.tasks:import_", fixed_delay=60.0, lock_name=shared, lock_ttl=30.0
    )
    other_node = InMemoryLock()
    assert other_node.try_acquire(shared, 30.0)
    history = MemoryRunHistory()
    runner = FireRunner(InMemoryLock(), history=history, clock=lambda: T0, node="n1")
    try:
        result = runner.run(Fire.at(starved, T0), lambda: None)
    finally:
        other_node.release(shared)
    assert result.verdict is Verdict.OVERLAPPING
    [record] = history.runs("app.tasks:import_", lock=shared)
    assert record.error is not None
    assert "another task" in record.error, record.error
