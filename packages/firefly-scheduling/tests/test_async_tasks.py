"""`async def` tasks on the synchronous hosts: awaited to completion, never reported unrun.

`tick` once printed "1 succeeded" beside "coroutine ... was never awaited" for an
`async def` task, because the host called it and dropped the coroutine. These tests
record from inside the coroutine AFTER an await, so a body that was only created
(never awaited) leaves no record, and the verdict must match what ran.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_async_unit_tasks as atasks
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.background import BackgroundScheduler

from firefly_scheduling import (
    ConfigurationError,
    InMemoryLock,
    ScheduledDescriptor,
    Settings,
    register,
)
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.cli import main
from firefly_scheduling.fires.outcome import FireResult, Verdict
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.runtime.coroutine_loop import CoroutineLoop
from firefly_scheduling.hosts.tick import TickHost
from firefly_scheduling.locks.guard import run_guarded

MODULE = "firefly_async_unit_tasks"
SUPPORT = str(Path(__file__).resolve().parent / "host_support")
MINUTE = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)


class StillClock:
    """The start of `MINUTE`; sleeping moves time on without waiting."""

    def __init__(self) -> None:
        self.current = MINUTE

    def now(self) -> datetime:
        return self.current

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.current += timedelta(seconds=seconds)
            time.sleep(0.02)

    def interrupt(self) -> None:
        pass


def task(name: str, **trigger: object) -> ScheduledDescriptor:
    return ScheduledDescriptor(target=f"{MODULE}:{name}", **trigger)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    atasks.reset()
    yield
    atasks.reset()


def tick_once(descriptors: list[ScheduledDescriptor]) -> TickHost:
    runtime = build_runtime(descriptors, Settings(lock_provider="memory"), host="tick", node="t")
    return TickHost(descriptors, runtime, clock=StillClock(), grace_period=5.0)


def test_tick_awaits_an_async_task_and_reports_success_only_because_it_ran() -> None:
    host = tick_once([task("tock", cron="* * * * *")])
    report = host.run()
    host.runtime.close()
    assert [result.verdict for result in report.results] == [Verdict.SUCCEEDED]
    assert len(atasks.calls("tock")) == 1, report.summary()
    assert "1 succeeded" in report.summary()


class Recorder:
    def __init__(self) -> None:
        self.results: list[FireResult] = []
        self._mutex = threading.Lock()

    def fire_finished(self, result: FireResult) -> None:
        with self._mutex:
            self.results.append(result)


def test_tick_reports_a_failing_async_task_as_failed() -> None:
    host = tick_once([task("aboom", cron="* * * * *")])
    report = host.run()
    host.runtime.close()
    assert [result.verdict for result in report.results] == [Verdict.FAILED]
    assert report.results[0].error == "RuntimeError: aboom"


def test_the_resident_host_runs_every_async_fire_on_one_loop_thread_of_its_own() -> None:
    recorder = Recorder()
    descriptors = [
        task("tock", fixed_rate=0.2, lock_name="tock-lock", lock_ttl=5.0),
        ScheduledDescriptor(target=f"{MODULE}:AsyncService.poll", fixed_rate=0.2),
    ]
    runtime = build_runtime(
        descriptors, Settings(lock_provider="memory"), host="run", node="u", observers=[recorder]
    )
    host = ResidentHost(descriptors, runtime, grace_period=5.0)
    host.start()
    time.sleep(1.0)
    assert host.shutdown() == 0
    tocks, polls = atasks.calls("tock"), atasks.calls("poll")
    assert len(tocks) >= 3
    assert len(polls) >= 3
    # current_fire() inside the coroutine names the fire the runner entered
    assert {call[1] for call in tocks} == {f"{MODULE}:tock"}
    # one loop, one thread, for every fire of every async task
    assert len({call[2] for call in tocks + polls}) == 1
    assert {call[3] for call in tocks + polls} == {"firefly-asyncio"}
    ran = [r for r in recorder.results if r.fire.target == f"{MODULE}:tock"]
    assert all(r.verdict is Verdict.SUCCEEDED for r in ran)
    assert len(ran) == len(tocks)
    assert "firefly-asyncio" not in {thread.name for thread in threading.enumerate()}


def test_register_on_a_threaded_scheduler_awaits_async_tasks() -> None:
    scheduler = BackgroundScheduler(timezone=UTC)
    register(
        scheduler,
        descriptors=[task("tock", fixed_rate=0.2, lock_name="tock-bg", lock_ttl=5.0)],
        lock=InMemoryLock(),
        settings=Settings(lock_provider="none"),
    )
    scheduler.start()
    try:
        deadline = time.monotonic() + 5
        while not atasks.calls("tock") and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        scheduler.shutdown(wait=True)
    assert atasks.calls("tock")


def test_the_plain_guard_refuses_an_async_body_rather_than_report_it_ran() -> None:
    descriptor = task("tock", fixed_rate=1.0)
    with pytest.raises(TypeError, match=r"firefly_async_unit_tasks:tock.*async def"):
        run_guarded(descriptor, atasks.tock, InMemoryLock())

    def hands_back_a_coroutine() -> object:
        return atasks.tock()

    # a plain callable that hands back a coroutine is a failure, not a success
    assert run_guarded(descriptor, hands_back_a_coroutine, InMemoryLock()) is Verdict.FAILED
    assert not atasks.calls("tock")


def test_register_on_an_asyncio_scheduler_awaits_on_the_scheduler_loop() -> None:
    async def scenario() -> tuple[int, list[FireResult]]:
        recorder_loop = id(asyncio.get_running_loop())
        scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop(), timezone=UTC)
        register(
            scheduler,
            descriptors=[
                task("tock", fixed_rate=0.2, lock_name="tock-aio", lock_ttl=5.0),
                ScheduledDescriptor(
                    target="firefly_host_unit_tasks:ping", fixed_rate=0.2, lock_name="ping-aio"
                ),
            ],
            lock=AsyncInMemoryLock(),
            settings=Settings(lock_provider="none"),
        )
        scheduler.start()
        await asyncio.sleep(1.0)
        scheduler.shutdown(wait=False)
        return recorder_loop, []

    sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
    import firefly_host_unit_tasks as plain  # noqa: PLC0415 - on the path set above

    plain.reset()
    loop_id, _ = asyncio.run(scenario())
    tocks = atasks.calls("tock")
    assert len(tocks) >= 3
    assert {call[2] for call in tocks} == {loop_id}  # the application's own loop
    assert {call[3] for call in tocks} == {"MainThread"}
    assert plain.calls("ping")  # a plain task ran too, in a worker thread


def test_an_asyncio_scheduler_refuses_a_synchronous_lock_naming_it() -> None:
    async def scenario() -> None:
        scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop(), timezone=UTC)
        register(
            scheduler,
            descriptors=[task("tock", fixed_rate=1.0, lock_name="x")],
            lock=InMemoryLock(),
            settings=Settings(lock_provider="none"),
        )

    with pytest.raises(ConfigurationError, match=r"InMemoryLock.*asyncio twin"):
        asyncio.run(scenario())


def test_a_threaded_scheduler_refuses_an_asyncio_lock_naming_it() -> None:
    with pytest.raises(ConfigurationError, match=r"AsyncInMemoryLock"):
        register(
            BackgroundScheduler(timezone=UTC),
            descriptors=[task("tock", fixed_rate=1.0, lock_name="x")],
            lock=AsyncInMemoryLock(),
            settings=Settings(lock_provider="none"),
        )


def test_the_tick_command_says_succeeded_only_for_an_async_task_that_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The report, as a user ran it: `tick` printed "1 succeeded" beside
    # "coroutine 'every_minute' was never awaited".
    for variable in ("FIREFLY_SCAN_PACKAGES", "FIREFLY_SCHEDULING_LOCK_PROVIDER"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("FIREFLY_SCHEDULING_MANIFEST", str(tmp_path / "absent.json"))
    arguments = ["tick", "--path", SUPPORT, "--app", "firefly_async_unit_app"]
    result = CliRunner().invoke(main, [*arguments, "--lock-provider", "memory"])
    assert result.exit_code == 0, result.output
    assert "1 succeeded" in result.output
    [call] = atasks.calls("every_minute")
    assert call[1] == "firefly_async_unit_app:every_minute"


def test_the_host_loop_runs_coroutines_on_one_thread_and_refuses_after_close() -> None:
    loop = CoroutineLoop()

    async def where() -> tuple[int, str]:
        await asyncio.sleep(0)
        return id(asyncio.get_running_loop()), threading.current_thread().name

    first, second = loop.run(where()), loop.run(where())
    assert first == second
    assert first[1] == "firefly-asyncio"
    loop.close()
    pending = where()
    with pytest.raises(RuntimeError, match="shutting down"):
        loop.run(pending)
    assert pending.cr_frame is None  # closed, not left un-awaited
