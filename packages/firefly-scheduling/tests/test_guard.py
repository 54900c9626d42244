"""run_guarded (the lock guard) and the lazy task resolver."""

from __future__ import annotations

import logging
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from firefly_scheduling import (
    BaseLock,
    ConfigurationError,
    InMemoryLock,
    LockBackendError,
    ScheduledDescriptor,
)
from firefly_scheduling.fires.outcome import Verdict
from firefly_scheduling.locks.guard import run_guarded
from firefly_scheduling.tasks.callables import CallableResolver, resolve_callable

LOCKED = ScheduledDescriptor(
    target="app.tasks:report", fixed_rate=1.0, lock_name="guard-test-report", lock_ttl=12.5
)
UNLOCKED = ScheduledDescriptor(target="app.tasks:tidy", fixed_rate=1.0)


class RecordingLock(InMemoryLock):
    """A real InMemoryLock that also records the TTLs it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.ttls: list[float] = []

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        self.ttls.append(ttl_seconds)
        return super()._acquire(name, owner, ttl_seconds)


class UnreachableLock(BaseLock):
    """A lock whose server is down: every acquire fails like a refused connection."""

    backend_name = "unreachable"

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        raise ConnectionRefusedError("connection refused")

    def _release(self, name: str, owner: str) -> bool:
        return False


class UntouchableLock:
    """A DistributedLock that fails the test if the guard ever calls it."""

    def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        raise AssertionError("an unlocked task must not touch the lock")

    def release(self, name: str) -> None:
        raise AssertionError("an unlocked task must not touch the lock")


@pytest.fixture
def lock() -> Iterator[RecordingLock]:
    instance = RecordingLock()
    yield instance
    instance.close()


def test_an_unlocked_task_runs_without_touching_the_lock() -> None:
    ran: list[bool] = []
    assert run_guarded(UNLOCKED, lambda: ran.append(True), UntouchableLock()) is Verdict.SUCCEEDED
    assert ran == [True]


def test_a_locked_task_runs_holding_the_lock_then_releases_it(lock: RecordingLock) -> None:
    held_during_body: list[bool] = []
    outcome = run_guarded(
        LOCKED, lambda: held_during_body.append(lock.is_held(LOCKED.lock_name or "")), lock
    )
    assert outcome is Verdict.SUCCEEDED
    assert held_during_body == [True]
    assert lock.ttls == [12.5]
    assert not lock.is_held("guard-test-report")
    other = InMemoryLock()
    assert other.try_acquire("guard-test-report", 5)
    other.release("guard-test-report")


def test_a_lost_race_skips_silently(lock: RecordingLock, caplog: pytest.LogCaptureFixture) -> None:
    other_node = InMemoryLock()
    assert other_node.try_acquire("guard-test-report", 30)
    ran: list[bool] = []
    with caplog.at_level(logging.DEBUG, logger="firefly_scheduling.locks.guard"):
        outcome = run_guarded(LOCKED, lambda: ran.append(True), lock)
    other_node.release("guard-test-report")
    assert outcome is Verdict.OVERLAPPING
    assert ran == []
    assert [record.levelno for record in caplog.records] == [logging.DEBUG]


def test_a_backend_error_skips_the_run_and_never_runs_unlocked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[bool] = []
    with caplog.at_level(logging.WARNING, logger="firefly_scheduling.locks.guard"):
        outcome = run_guarded(LOCKED, lambda: ran.append(True), UnreachableLock())
    assert outcome is Verdict.BACKEND_ERROR
    assert ran == []
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "app.tasks:report" in record.getMessage()
    assert "connection refused" in record.getMessage()


def test_the_unreachable_lock_really_raises_lock_backend_error() -> None:
    with pytest.raises(LockBackendError):
        UnreachableLock().try_acquire("x", 1)


def test_a_failing_body_is_logged_with_the_target_and_swallowed(
    lock: RecordingLock, caplog: pytest.LogCaptureFixture
) -> None:
    def body() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="firefly_scheduling.locks.guard"):
        outcome = run_guarded(LOCKED, body, lock)
    assert outcome is Verdict.FAILED
    (record,) = caplog.records
    assert "app.tasks:report" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert not lock.is_held("guard-test-report")
    # The next fire runs normally.
    assert run_guarded(LOCKED, lambda: None, lock) is Verdict.SUCCEEDED


def test_an_unlocked_failing_body_is_swallowed_too(caplog: pytest.LogCaptureFixture) -> None:
    def body() -> None:
        raise ValueError("bad")

    with caplog.at_level(logging.ERROR, logger="firefly_scheduling.locks.guard"):
        assert run_guarded(UNLOCKED, body, UntouchableLock()) is Verdict.FAILED
    assert "app.tasks:tidy" in caplog.records[0].getMessage()


def test_an_interrupt_propagates_after_the_lock_is_released(lock: RecordingLock) -> None:
    def body() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_guarded(LOCKED, body, lock)
    assert not lock.is_held("guard-test-report")


def test_a_locked_descriptor_without_ttl_uses_the_default(lock: RecordingLock) -> None:
    descriptor = ScheduledDescriptor(target="app.tasks:x", fixed_rate=1.0, lock_name="guard-ttl")
    assert run_guarded(descriptor, lambda: None, lock) is Verdict.SUCCEEDED
    assert lock.ttls == [30.0]


# -- resolving targets lazily ------------------------------------------------------------


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh importable module `<unique>.jobs` with a function and a class of tasks."""
    package = f"guardapp_{uuid.uuid4().hex[:12]}"
    root = tmp_path / package
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "jobs.py").write_text(
        textwrap.dedent(
            """
            CREATED = []

            def ping():
                return "pong"

            class Reports:
                def __init__(self, prefix="plain"):
                    CREATED.append(self)
                    self.prefix = prefix

                def daily(self):
                    return self.prefix + ":daily"

                def weekly(self):
                    return self.prefix + ":weekly"

            NOT_CALLABLE = 42
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"{package}.jobs"
    for name in [name for name in sys.modules if name.startswith(package)]:
        del sys.modules[name]


def test_resolves_module_functions_importing_on_first_use(app_module: str) -> None:
    resolver = CallableResolver()
    assert app_module not in sys.modules
    assert resolver.resolve(f"{app_module}:ping")() == "pong"
    assert app_module in sys.modules


def test_a_class_is_instantiated_once_for_all_its_methods(app_module: str) -> None:
    resolver = CallableResolver()
    daily = resolver.resolve(f"{app_module}:Reports.daily")
    weekly = resolver.resolve(f"{app_module}:Reports.weekly")
    assert resolver.resolve(f"{app_module}:Reports.daily") is daily
    assert (daily(), weekly()) == ("plain:daily", "plain:weekly")
    assert len(sys.modules[app_module].CREATED) == 1


def test_a_resolver_builds_instances_for_di_containers(app_module: str) -> None:
    built: list[type] = []

    def container(cls: type) -> object:
        built.append(cls)
        return cls(prefix="injected")

    resolver = CallableResolver(container)
    assert resolver.resolve(f"{app_module}:Reports.daily")() == "injected:daily"
    assert resolver.resolve(f"{app_module}:Reports.weekly")() == "injected:weekly"
    assert [cls.__name__ for cls in built] == ["Reports"]


def test_resolve_callable_caches_per_process(app_module: str) -> None:
    first = resolve_callable(f"{app_module}:Reports.daily")
    assert resolve_callable(f"{app_module}:Reports.daily") is first
    assert first() == "plain:daily"


@pytest.mark.parametrize(
    ("suffix", "fragment"),
    [
        (":missing", "not found"),
        (":Reports.missing", "not found"),
        (":NOT_CALLABLE", "is not callable"),
        (":ping.nothing", "is not a class"),
    ],
)
def test_bad_targets_name_the_target(app_module: str, suffix: str, fragment: str) -> None:
    target = f"{app_module}{suffix}"
    with pytest.raises(ConfigurationError, match=fragment) as raised:
        CallableResolver().resolve(target)
    assert target in str(raised.value)


def test_an_unimportable_module_names_the_target() -> None:
    with pytest.raises(ConfigurationError, match=r"no_such_app_module:f: importing module"):
        CallableResolver().resolve("no_such_app_module:f")


def test_a_failing_constructor_names_the_class(app_module: str) -> None:
    def container(cls: type) -> object:
        raise RuntimeError("container down")

    with pytest.raises(ConfigurationError, match="cannot instantiate Reports: RuntimeError"):
        CallableResolver(container).resolve(f"{app_module}:Reports.daily")
