"""`max_workers`: the hosts' body threads, refused when it is no whole number of at least 1.

`run --max-workers N` and `tick --max-workers N` pass it on; before, a 0 given to the
Python API silently meant "the default".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime
from firefly_scheduling.hosts.tick import TickHost

TASKS = tuple(
    ScheduledDescriptor(target=f"firefly_host_unit_tasks:ping{index}", fixed_rate=1.0)
    for index in range(5)
)


@pytest.fixture
def runtime() -> Iterator[TaskRuntime]:
    built = build_runtime(list(TASKS), Settings(lock_provider="memory"), host="run", node="unit")
    try:
        yield built
    finally:
        built.close()


@pytest.mark.parametrize("host", [ResidentHost, TickHost])
@pytest.mark.parametrize("value", [0, -1, True, 2.5])
def test_a_bad_max_workers_is_refused_naming_it(
    runtime: TaskRuntime, host: type[ResidentHost] | type[TickHost], value: object
) -> None:
    with pytest.raises(ValueError, match=rf"max_workers .* got {value!r}"):
        host(TASKS, runtime, max_workers=value)  # type: ignore[arg-type]


def test_the_resident_host_runs_bodies_on_max_workers_threads(runtime: TaskRuntime) -> None:
    host = ResidentHost(TASKS, runtime, max_workers=3)
    assert host.scheduler._lookup_executor("default")._pool._max_workers == 3


def test_the_resident_host_defaults_to_one_thread_per_task(runtime: TaskRuntime) -> None:
    host = ResidentHost(TASKS, runtime)
    assert host.scheduler._lookup_executor("default")._pool._max_workers == len(TASKS)
