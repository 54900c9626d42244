# Generated from schedule_watch_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`RuntimeScheduleWatch`: a host's jobs kept in step with the store's runtime schedules.

Whenever the store's change mark moved (`hosts.runtime.change_mark`: the watch
follows it, and looks at it itself at least every `WATCH_SECONDS`), the watch reads
the runtime schedules (one round trip) and adds a job for each new one, removes the
job of each one gone, and replaces the job of each one changed, so a schedule added
or removed anywhere reaches every node within the mark's freshness and the
triggers' poll, plus two reads. Its task is the schedule's descriptor under the
schedule's name (`control.runtime_tasks`), run by the same job machinery, claims
and locks as a task of the code, its fires made `runtime`.

A record the code does not allow (a target neither `@schedulable` nor `@scheduled`,
a name that is a code task's, a boot-only argument) is never run: it is logged at
ERROR once, naming the schedule and why, and again only if it changes. When the
store cannot be read, the jobs stay as they were (the last schedules read) and a
WARNING says so once until a read succeeds.

Written once, for asyncio (the asyncio host awaits `watch()` as a task on its loop);
`schedule_watch.py`, for the resident host's thread, is generated from it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from firefly_scheduling.control.records import ControlStoreError, RuntimeSchedule
from firefly_scheduling.control.runtime_tasks import RuntimeTask, runtime_tasks
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.outcome import TriggerKind
from firefly_scheduling.hosts.apscheduler.jobs import attach_task, detach_task
from firefly_scheduling.hosts.runtime.change_mark import FOLLOW_SECONDS, ChangeMark
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime

logger = logging.getLogger("firefly_scheduling.hosts")

#: The longest the watch sleeps without looking at the change mark; a change read by
#: the host's polling loop wakes it (a change reaches every node within the mark's
#: freshness and the triggers' poll, plus two reads).
WATCH_SECONDS = FOLLOW_SECONDS
#: The job id of a runtime schedule's task (apart from the code tasks' job ids).
RUNTIME_JOB_PREFIX = "firefly-scheduling-runtime:"


@dataclass(frozen=True)
class RuntimeScheduleSource:
    """Where a host reads runtime schedules, and which callables it lets them run."""

    store: ControlStore
    allowed: frozenset[str]


def runtime_schedule_source(
    store: ControlStore | None, allowed: Collection[str] | None
) -> RuntimeScheduleSource | None:
    """The runtime schedules a host watches: those of its control store `store`, run
    when their target is in `allowed` (`tasks.discovery.runtime_targets`). None when
    the host has no control store (the fire runner's pause reader says once that
    steering needs one) or is given no `allowed` targets."""
    if store is None or allowed is None:
        return None
    return RuntimeScheduleSource(store, frozenset(allowed))


def read_runtime_tasks(source: RuntimeScheduleSource) -> list[RuntimeTask]:
    """The runtime schedules a node may run, read once; each refused one logged at ERROR.

    For `tick`, whose pass reads the store once. A store that cannot be read is
    logged at WARNING and runs no runtime schedule this pass.
    """
    try:
        schedules = source.store.schedules()
    except ControlStoreError as err:
        logger.warning("runtime schedules unread, none runs this pass: %s", err)
        return []
    accepted, refused = runtime_tasks(schedules, source.allowed)
    for name, reason in refused.items():
        logger.error("runtime schedule %r ignored: %s", name, reason)
    return accepted


class RuntimeScheduleWatch:
    """Adds, replaces and removes a scheduler's runtime-schedule jobs as the store changes."""

    def __init__(
        self,
        scheduler: Any,
        runtime: TaskRuntime,
        source: RuntimeScheduleSource,
        *,
        interval: float = WATCH_SECONDS,
        mark: ChangeMark | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.runtime = runtime
        self.source = source
        self.interval = interval
        #: The schedules whose jobs are attached, by name.
        self.attached: dict[str, RuntimeSchedule] = {}
        self._refused: dict[str, RuntimeSchedule] = {}
        self._unreadable = False
        self._stopped = threading.Event()
        self._changes = (mark or ChangeMark(source.store)).reader()

    def watch(self) -> None:
        """Refresh now, then whenever the store's change mark moved (followed, and
        looked at at least every `interval` seconds), until `stop()`; never raises."""
        while not self._stopped.is_set():
            try:
                if self._changes.wait_moved(self.interval) and not self._stopped.is_set():
                    self.refresh()
            except Exception:  # a defect must not end the watch: the next read retries
                logger.exception("runtime schedules: refreshing the jobs failed")
                self._pause()

    def stop(self) -> None:
        """End `watch()` (the jobs stay; the host removes them when it stops)."""
        self._stopped.set()
        self._changes.wake()

    def refresh(self) -> None:
        """One read of the store, and the jobs changed to match it."""
        try:
            schedules = self.source.store.schedules()
        except ControlStoreError as err:
            if not self._unreadable:
                logger.warning(
                    "runtime schedules unread, the %d known keep running: %s",
                    len(self.attached),
                    err,
                )
            self._unreadable = True
            return
        if self._unreadable:
            logger.warning("runtime schedules readable again")
            self._unreadable = False
        accepted, refused = runtime_tasks(schedules, self.source.allowed)
        self._log_refused(schedules, refused)
        wanted = {task.name: task for task in accepted}
        for name in [name for name in self.attached if name not in wanted]:
            detach_task(self.scheduler, RUNTIME_JOB_PREFIX + name)
            del self.attached[name]
            logger.info("runtime schedule %r removed: its job stops", name)
        for name, task in wanted.items():
            if self.attached.get(name) != task.schedule:
                self._attach(task)

    def _attach(self, task: RuntimeTask) -> None:
        name = task.name
        replacing = name in self.attached
        self.runtime.callables.alias(name, task.callable_target)
        job_id = RUNTIME_JOB_PREFIX + name
        if replacing:
            detach_task(self.scheduler, job_id)
        attach_task(self.scheduler, task.task, self.runtime, job_id, kind=TriggerKind.RUNTIME)
        self.attached[name] = task.schedule
        logger.info(
            "runtime schedule %r %s: %s, added by %r",
            name,
            "replaced" if replacing else "added",
            task.callable_target,
            task.schedule.by,
        )

    def _log_refused(
        self, schedules: list[RuntimeSchedule], refused: dict[str, ConfigurationError]
    ) -> None:
        by_name = {schedule.name: schedule for schedule in schedules}
        for name, reason in refused.items():
            if self._refused.get(name) != by_name[name]:
                logger.error("runtime schedule %r ignored: %s", name, reason)
                self._refused[name] = by_name[name]
            if name in self.attached:  # changed into something refused: stop its job
                detach_task(self.scheduler, RUNTIME_JOB_PREFIX + name)
                del self.attached[name]
        for name in [name for name in self._refused if name not in refused]:
            del self._refused[name]

    def _pause(self) -> None:
        self._stopped.wait(self.interval)
