"""What used to boot and then fail every fire is refused before the scheduler starts.

* The database provider before `firefly-scheduling migrate`: the lease table is
  missing. `run` booted and logged two tracebacks per fire; `tick` exited 1.
* A method task whose class cannot be built (`__init__(self, db)`): every fire was
  recorded as a task failure.
* A lock backend that does not answer: retried for a bounded time, then exit 3
  (`hosts.probe`; the servers' side is in tests-integration).

Each is refused with exit 2 (3 for the silent backend) and a message saying what to
do, by `run`, `tick` and the asyncio host alike.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from firefly_scheduling import ConfigurationError, Settings
from firefly_scheduling.cli import main
from firefly_scheduling.errors import BackendUnavailable, LockBackendError
from firefly_scheduling.hosts.runtime.probe import PROBE_NAME, wait_for_backend
from firefly_scheduling.hosts.runtime.workers import RESIDENT_MAX_WORKERS, TICK_MAX_WORKERS
from firefly_scheduling.locks.memory import InMemoryLock
from firefly_scheduling.tasks.scanner import scan

pytest.importorskip("firefly_scheduling_database")

SUPPORT = Path(__file__).resolve().parent / "host_support"
HOSTS = ["run", "tick"]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for variable in [name for name in os.environ if name.startswith("FIREFLY_")]:
        if not variable.startswith("FIREFLY_TEST_"):
            monkeypatch.delenv(variable)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("FIREFLY_SCHEDULING_MANIFEST", str(tmp_path / "absent.json"))
    monkeypatch.syspath_prepend(str(SUPPORT))
    return tmp_path


def host(command: str, app: str, *extra: str) -> list[str]:
    return [command, "--path", str(SUPPORT), "--app", app, "--max-workers", "1", *extra]


# -- the database provider before `migrate` -------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", HOSTS)
def test_the_database_provider_before_migrate_is_refused_at_boot(
    command: str, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_PROVIDER", "database")
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_DATABASE_URL", f"sqlite:///{clean_env / 'l.db'}")
    result = CliRunner().invoke(main, host(command, "firefly_boot_cron_app"))
    assert result.exit_code == 2, result.output
    assert "firefly_scheduling_locks" in result.output
    assert "firefly-scheduling migrate" in result.output
    assert "Traceback" not in result.output


@pytest.mark.timeout(60)
def test_the_asyncio_host_refuses_the_database_provider_before_migrate(tmp_path: Path) -> None:
    from firefly_scheduling.contrib.starlette import scheduled_tasks  # noqa: PLC0415

    settings = Settings(
        lock_provider="database",
        lock_urls={"database": f"sqlite:///{tmp_path / 'l.db'}"},
        history_url="off",
    )

    async def start() -> None:
        async with scheduled_tasks(settings=settings, descriptors=_cron_tasks()):
            pytest.fail("the host started")

    with pytest.raises(ConfigurationError, match="firefly-scheduling migrate"):
        asyncio.run(start())


def _cron_tasks() -> list[object]:
    sys.path.insert(0, str(SUPPORT))
    try:
        return list(scan(["firefly_boot_cron_app"]))
    finally:
        sys.path.remove(str(SUPPORT))


# -- a method task whose class cannot be built ----------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", HOSTS)
def test_a_method_task_whose_class_cannot_be_built_is_refused_at_boot(
    command: str, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_PROVIDER", "memory")
    result = CliRunner().invoke(main, host(command, "firefly_boot_unit_app"))
    assert result.exit_code == 2, result.output
    assert "firefly_boot_unit_app:NeedsDatabase.work" in result.output
    assert "cannot instantiate NeedsDatabase" in result.output
    assert "resolver" in result.output


def test_the_asyncio_host_refuses_it_and_a_resolver_fixes_it(clean_env: Path) -> None:
    from firefly_scheduling.contrib.starlette import scheduled_tasks  # noqa: PLC0415

    descriptors = list(scan(["firefly_boot_unit_app"]))
    settings = Settings(lock_provider="memory", history_url="off")

    async def start(resolver: object) -> bool:
        async with scheduled_tasks(
            settings=settings,
            descriptors=descriptors,
            resolver=resolver,  # type: ignore[arg-type]
        ):
            return True

    with pytest.raises(ConfigurationError, match=r"NeedsDatabase\.work: cannot instantiate"):
        asyncio.run(start(None))
    assert asyncio.run(start(lambda cls: cls(db="a connection")))


# -- a backend that does not answer ---------------------------------------------------


class Clock:
    """A monotonic clock the fake sleep advances: the wait's bound, without waiting."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


class SilentFor(InMemoryLock):
    """A lock whose backend fails its first `failures` claims (a server still starting)."""

    cross_process = True  # so that the probe asks it

    def __init__(self, failures: int, error: Exception) -> None:
        super().__init__()
        self.failures = failures
        self.error = error
        self.claims: list[str] = []

    def try_claim(self, name: str, seconds: float) -> bool:
        self.claims.append(name)
        if len(self.claims) <= self.failures:
            raise self.error
        return super().try_claim(name, seconds)


def test_a_backend_that_answers_within_the_wait_lets_the_host_start() -> None:
    clock = Clock()
    lock = SilentFor(3, LockBackendError("connection refused"))
    wait_for_backend(lock, seconds=30, clock=clock, sleep=clock.sleep)
    assert lock.claims == [PROBE_NAME] * 4
    assert clock.pauses == [0.5, 1.0, 2.0]  # a capped backoff


def test_a_backend_silent_for_the_whole_wait_is_refused_with_backend_unavailable() -> None:
    clock = Clock()
    lock = SilentFor(10**6, LockBackendError("connection refused"))
    with pytest.raises(BackendUnavailable) as raised:
        wait_for_backend(lock, seconds=30, clock=clock, sleep=clock.sleep)
    assert clock.now == pytest.approx(30)  # bounded: no pause runs past the deadline
    assert max(clock.pauses) <= 5.0
    assert "did not answer within 30s" in str(raised.value)
    assert "--wait-for-backend" in str(raised.value)
    assert "connection refused" in str(raised.value)


def test_a_backend_that_refuses_is_not_waited_for() -> None:
    clock = Clock()
    lock = SilentFor(10**6, ConfigurationError("table 'locks' does not exist"))
    with pytest.raises(ConfigurationError):
        wait_for_backend(lock, seconds=30, clock=clock, sleep=clock.sleep)
    assert lock.claims == [PROBE_NAME]
    assert clock.pauses == []


def test_zero_seconds_asks_once() -> None:
    clock = Clock()
    lock = SilentFor(1, LockBackendError("connection refused"))
    with pytest.raises(BackendUnavailable):
        wait_for_backend(lock, seconds=0, clock=clock, sleep=clock.sleep)
    assert lock.claims == [PROBE_NAME]


def test_a_lock_without_a_backend_is_not_probed() -> None:
    lock = InMemoryLock()
    wait_for_backend(lock, seconds=0)
    assert not lock.is_held(PROBE_NAME)


@pytest.mark.parametrize(
    ("value", "seconds"), [("0", 0.0), ("45s", 45.0), ("2m", 120.0), (None, 30.0)]
)
def test_the_wait_is_configured_by_its_variable(value: str | None, seconds: float) -> None:
    env = {} if value is None else {"FIREFLY_SCHEDULING_WAIT_FOR_BACKEND": value}
    assert Settings.from_env(env).wait_for_backend == seconds


@pytest.mark.parametrize("command", HOSTS)
def test_the_hosts_take_wait_for_backend(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert "--wait-for-backend SECONDS" in result.output


# -- --max-workers says what the code does --------------------------------------------


@pytest.mark.parametrize(
    ("command", "ceiling"), [("run", RESIDENT_MAX_WORKERS), ("tick", TICK_MAX_WORKERS)]
)
def test_max_workers_help_states_the_hosts_own_bound(command: str, ceiling: int) -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(main, [command, "--help"])
    assert f"at most {ceiling}]" in " ".join(result.output.split())
    assert (RESIDENT_MAX_WORKERS, TICK_MAX_WORKERS) == (64, 32)
