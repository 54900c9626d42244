"""`async def` tasks on the synchronous hosts: awaited to completion, never reported unrun.

Issue 9: `tick` printed "1 succeeded" beside "coroutine ... was never awaited" for an
`async def` task, because the host called it and dropped the coroutine. These tests
record from inside the coroutine AFTER an await, so a body that was only created
(never awaited) leaves no record, and the verdict must match what ran.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_async_unit_tasks as atasks

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.fires.outcome import FireStatus
from firefly_scheduling.hosts.boot import build_runtime
from firefly_scheduling.hosts.tick import TickHost

MODULE = "firefly_async_unit_tasks"
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
    assert [result.verdict for result in report.results] == [FireStatus.SUCCEEDED]
    assert len(atasks.calls("tock")) == 1, report.summary()
    assert "1 succeeded" in report.summary()
