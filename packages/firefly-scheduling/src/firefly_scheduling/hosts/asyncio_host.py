"""The asyncio host: firefly tasks on the application's own event loop.

For asyncio applications (FastAPI, Starlette, aiohttp, async workers): an
APScheduler 3 `AsyncIOScheduler` bound to the running loop, whose jobs are awaited
on that loop (`hosts.apscheduler.jobs_async`), through the asyncio fire runner and an asyncio lock
(`firefly_scheduling.aio`). An `async def` task runs on the application's loop, so it
may use the application's async clients and pools; a plain task runs in a worker
thread, so it never stalls the loop.

`start()` is called on the running loop (the lifespan's startup) and `await stop()`
on the same loop (its shutdown). Stopping follows the other hosts' rules: no new
fire starts, running fires get `grace_period` seconds to finish and release their
locks through the fire runner. What differs is the end of the grace period: a
coroutine can be cancelled, so a fire still running then is cancelled (the runner
records it failed, "interrupted", stops its keep-alive and releases its task lock
once the body has unwound) instead of being abandoned with its lock held, as a
thread must be. The signals themselves belong to the server (uvicorn), which runs
the lifespan's shutdown on SIGTERM/SIGINT.

Given a control store, two more tasks on the loop steer the host
(`hosts.runtime.steering_async`): one runs the manual triggers of its tasks, within
`POLL_SECONDS` of being asked, the other their backfills. A stop lets them end
between two fires, within the grace period, then cancels them. A third one reads
the runtime schedules of that store (`hosts.runtime.schedule_watch_async`) and keeps
a job for each.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from datetime import UTC
from typing import Any

from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.hosts.apscheduler.jobs_async import attach_tasks
from firefly_scheduling.hosts.observation.passed_over_report import scheduler_logger
from firefly_scheduling.hosts.runtime.asyncio_runtime import AsyncTaskRuntime
from firefly_scheduling.hosts.runtime.catch_up_async import CatchUpReport, catch_up
from firefly_scheduling.hosts.runtime.change_mark_async import AsyncChangeMark
from firefly_scheduling.hosts.runtime.schedule_watch_async import (
    RuntimeScheduleWatch,
    runtime_schedule_source,
)
from firefly_scheduling.hosts.runtime.shutdown import DEFAULT_GRACE_PERIOD_SECONDS, describe_fires
from firefly_scheduling.hosts.runtime.steering_async import watch_backfills, watch_triggers
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

logger = logging.getLogger("firefly_scheduling.hosts")

#: How long cancelled fires get to unwind (record, release) after the grace period.
CANCEL_UNWIND_SECONDS = 5.0


class AsyncHost:
    """Runs `descriptors` on an `AsyncIOScheduler` of the running event loop."""

    def __init__(
        self,
        descriptors: Sequence[ScheduledDescriptor],
        runtime: AsyncTaskRuntime,
        *,
        grace_period: float = DEFAULT_GRACE_PERIOD_SECONDS,
        control: AsyncControlStore | None = None,
        runtime_targets: Collection[str] | None = None,
    ) -> None:
        """`control`, when given, is where the host finds triggers and backfills and,
        with `runtime_targets` (the callables runtime schedules may run), the schedules
        defined at runtime (`hosts.runtime.schedule_watch_async`), watched by a task on
        the loop."""
        if not grace_period >= 0:
            raise ValueError(f"grace_period must be >= 0 seconds, got {grace_period!r}")
        self.descriptors = tuple(descriptors)
        self.runtime = runtime
        self.grace_period = grace_period
        self.scheduler: Any = None
        #: Catching up missed fires at start (`hosts.runtime.catch_up_async`), when a
        #: task has `catchup=`; a stop ends it between two fires.
        self.catch_up: asyncio.Task[list[CatchUpReport]] | None = None
        #: Where triggers and backfills are found; None: this host is not steered.
        self.control = control
        #: The tasks running triggers and backfills, when there is a control store.
        self.steering: list[asyncio.Task[None]] = []
        #: The control store's runtime schedules, watched when `runtime_targets` is given.
        self.runtime_schedules = runtime_schedule_source(control, runtime_targets)
        self.schedule_watch: RuntimeScheduleWatch | None = None
        self._watching: asyncio.Task[None] | None = None
        #: The control store's change mark, read for every steering loop of this host.
        self.mark: AsyncChangeMark | None = None

    def start(self) -> None:
        """Start scheduling on the running loop (call it from a coroutine)."""
        # Imported here: the package root must stay light, and only this host needs it.
        from apscheduler.schedulers.asyncio import AsyncIOScheduler  # noqa: PLC0415

        scheduler = AsyncIOScheduler(
            event_loop=asyncio.get_running_loop(), timezone=UTC, logger=scheduler_logger()
        )
        attach_tasks(scheduler, self.descriptors, self.runtime)
        scheduler.start()
        self.scheduler = scheduler
        self.mark = mark = None if self.control is None else AsyncChangeMark(self.control)
        if self.runtime_schedules is not None:
            self.schedule_watch = RuntimeScheduleWatch(
                scheduler, self.runtime, self.runtime_schedules, mark=mark
            )
            self._watching = asyncio.get_running_loop().create_task(
                self.schedule_watch.watch(), name="firefly-runtime-schedules"
            )
        if any(d.catchup is not None for d in self.descriptors):
            # Beside the scheduler: the fires due from now on do not wait for it.
            self.catch_up = asyncio.get_running_loop().create_task(
                catch_up(self.descriptors, self.runtime), name="firefly-catch-up"
            )
        if self.control is not None:
            loop = asyncio.get_running_loop()
            for name, watch in (("triggers", watch_triggers), ("backfills", watch_backfills)):
                self.steering.append(
                    loop.create_task(
                        watch(self.descriptors, self.runtime, self.control, mark=mark),
                        name=f"firefly-{name}",
                    )
                )
        logger.info(
            "asyncio host started on node %s with %d task(s)",
            self.runtime.node,
            len(self.descriptors),
        )

    async def stop(self) -> list[object]:
        """Stop new fires, give running ones the grace period, cancel the rest, close.

        Returns the fires that had to be cancelled (empty after a clean stop).
        """
        self.runtime.stop_accepting()
        if self.mark is not None:  # the loops following it see the stop now
            self.mark.wake()
        await self._stop_watching()
        scheduler = self.scheduler
        running = scheduler is not None and bool(scheduler.running)
        if running:
            scheduler.pause()
        in_flight = self.runtime.in_flight()
        if in_flight:
            logger.info(
                "stopping: waiting up to %.1f s for %s",
                self.grace_period,
                describe_fires(in_flight),
            )
        cancelled: list[object] = []
        if self.catch_up is not None and not self.catch_up.done():
            await asyncio.wait([self.catch_up], timeout=self.grace_period)
        await self._stop_steering()
        if not await self.runtime.wait_idle_async(self.grace_period):
            cancelled = self.runtime.in_flight()
            logger.error(
                "stopping: the grace period of %.1f s ended with %s still running; "
                "cancelling them (their locks are released once they unwind)",
                self.grace_period,
                describe_fires(cancelled),
            )
        if running:
            # Cancels the jobs still awaited by APScheduler's executor: only the fires
            # the grace period gave up on are left at this point.
            scheduler.shutdown(wait=False)
        if cancelled and not await self.runtime.wait_idle_async(CANCEL_UNWIND_SECONDS):
            # A plain body in a worker thread cannot be cancelled: closing the lock now
            # would free its task lock while it runs. It ends with the process, and
            # its lock with its session or by its TTL.
            logger.error(
                "stopping: %s still running after cancellation; the lock backend is left "
                "open so their task locks stay held",
                describe_fires(self.runtime.in_flight()),
            )
            return cancelled
        await self.runtime.aclose()
        if self.control is not None:
            await self.control.aclose()
        logger.info("asyncio host stopped")
        return cancelled

    async def _stop_watching(self) -> None:
        """End the runtime schedules' watch (its jobs go with the scheduler; its store
        is the host's control store, closed last)."""
        if self.schedule_watch is not None:
            self.schedule_watch.stop()
        if self._watching is not None:
            await asyncio.wait([self._watching], timeout=CANCEL_UNWIND_SECONDS)
            self._watching.cancel()

    async def _stop_steering(self) -> None:
        """Let the steering tasks end between two fires, within the grace period; then
        cancel them (a fire of theirs still running is in flight, as any other)."""
        running = [task for task in self.steering if not task.done()]
        if not running:
            return
        _, pending = await asyncio.wait(running, timeout=self.grace_period)
        for task in pending:
            task.cancel()
