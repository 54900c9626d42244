"""The resident host behind `firefly-scheduling run`: one long-lived process per node.

Hosted on APScheduler 3 (`BackgroundScheduler`) rather than a home-made loop: it is
mature and widely deployed, wakes exactly at the next due time (sub-second rates
included), runs bodies in a thread pool, and already implements per-job
`max_instances`, coalescing and misfire handling, which are exactly the no-overlap
and no-burst rules of `fixed_rate`. What it lacks (crontab day-of-week semantics,
epoch-aligned fire instants, end-to-start delays) is supplied by `jobs` and
`triggers`.

Schedules defined at runtime (`firefly-scheduling schedules add`) are read from the
control store by a thread of their own, which adds and removes their jobs
(`hosts.runtime.schedule_watch`).

A task with `catchup=` has the fires the whole fleet missed run once, oldest first,
in a thread started with the scheduler (`hosts.runtime.catch_up`).

Given a control store, two more threads steer the host (`hosts.runtime.steering`):
one runs the manual triggers of its tasks, within `POLL_SECONDS` of being asked,
the other the backfills, one instant at a time.

Shutdown (SIGTERM or SIGINT) follows `firefly_scheduling.hosts.runtime.shutdown`: no new
fire starts, the scheduler stops, running bodies get `grace_period` seconds to finish
and release their locks, then the lock backend is closed and the process exits 0.
Bodies still running after the grace period are abandoned: the process exits at once,
their task locks still held; a second signal ends the grace period at once.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Collection, Sequence
from datetime import UTC

from apscheduler.executors.debug import DebugExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.hosts.apscheduler.claim_first import ClaimFirstExecutor
from firefly_scheduling.hosts.apscheduler.jobs import attach_tasks
from firefly_scheduling.hosts.observation.health import HEARTBEAT_SECONDS, Heartbeat
from firefly_scheduling.hosts.observation.passed_over_report import scheduler_logger
from firefly_scheduling.hosts.runtime.catch_up import catch_up
from firefly_scheduling.hosts.runtime.change_mark import ChangeMark
from firefly_scheduling.hosts.runtime.schedule_watch import (
    WATCH_SECONDS,
    RuntimeScheduleWatch,
    runtime_schedule_source,
)
from firefly_scheduling.hosts.runtime.shutdown import (
    DEFAULT_GRACE_PERIOD_SECONDS,
    StopRequest,
    drain,
    exit_abandoning,
    ignore_stop_signals,
    log_stop_request,
    stop_on_signals,
)
from firefly_scheduling.hosts.runtime.steering import watch_backfills, watch_triggers
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime
from firefly_scheduling.hosts.runtime.workers import (
    RESIDENT_MAX_WORKERS,
    checked_max_workers,
    worker_count,
)
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.overlap import runs_per_node

logger = logging.getLogger("firefly_scheduling.hosts")


class ResidentHost:
    """Runs `descriptors` on APScheduler until asked to stop."""

    def __init__(
        self,
        descriptors: Sequence[ScheduledDescriptor],
        runtime: TaskRuntime,
        *,
        grace_period: float = DEFAULT_GRACE_PERIOD_SECONDS,
        max_workers: int | None = None,
        stop: StopRequest | None = None,
        heartbeat: Heartbeat | None = None,
        control: ControlStore | None = None,
        runtime_targets: Collection[str] | None = None,
    ) -> None:
        """`heartbeat`, when given, is beaten by the scheduler's own thread (`/livez`);
        `control`, when given, is where the host finds triggers and backfills and,
        with `runtime_targets` (the callables runtime schedules may run), the schedules
        defined at runtime (`hosts.runtime.schedule_watch`)."""
        self.descriptors = tuple(descriptors)
        self.control = control
        #: The threads running triggers and backfills, when there is a control store.
        self.steering: list[threading.Thread] = []
        self.runtime = runtime
        self.grace_period = grace_period
        self.stop = stop or StopRequest()
        #: The thread catching up missed fires at start, when a task has `catchup=`.
        self.catch_up: threading.Thread | None = None
        # Runtime schedules add tasks after boot: their bodies may use up to the
        # ceiling (a pool starts its threads as fires need them, not up front).
        runtime_schedules = runtime_schedule_source(control, runtime_targets)
        tasks = sum(runs_per_node(descriptor.overlap) for descriptor in self.descriptors)
        workers = worker_count(
            checked_max_workers(max_workers),
            RESIDENT_MAX_WORKERS if runtime_schedules is not None else tasks,
            RESIDENT_MAX_WORKERS,
        )
        self.scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ClaimFirstExecutor(workers, runtime)},
            logger=scheduler_logger(),
        )
        attach_tasks(self.scheduler, self.descriptors, runtime)
        #: The control store's change mark, read for every steering loop of this host.
        self.mark = None if control is None else ChangeMark(control)
        self.schedule_watch = (
            None
            if runtime_schedules is None
            else RuntimeScheduleWatch(self.scheduler, runtime, runtime_schedules, mark=self.mark)
        )
        self._watching: threading.Thread | None = None
        if heartbeat is not None:
            # Run inline by the scheduler's thread (DebugExecutor): a beat proves that
            # thread woke on time, whatever the task pool is doing.
            self.scheduler.add_executor(DebugExecutor(), "firefly-health")
            self.scheduler.add_job(
                heartbeat.beat,
                IntervalTrigger(seconds=HEARTBEAT_SECONDS, timezone=UTC),
                id="firefly-health-heartbeat",
                executor="firefly-health",
                coalesce=True,
                misfire_grace_time=None,
            )

    def start(self) -> None:
        self.scheduler.start()
        self._start_catch_up()
        self._start_steering()
        if self.schedule_watch is not None:
            self._watching = threading.Thread(
                target=self.schedule_watch.watch, name="firefly-runtime-schedules", daemon=True
            )
            self._watching.start()
        logger.info(
            "resident host started on node %s with %d task(s)",
            self.runtime.node,
            len(self.descriptors),
        )

    def _start_catch_up(self) -> None:
        """Catch up the `catchup=` tasks' missed fires in a thread of their own
        (`hosts.runtime.catch_up`), beside the scheduler: the fires due from now on do
        not wait for them. A stop ends it between two fires."""
        if any(d.catchup is not None for d in self.descriptors):
            self.catch_up = threading.Thread(
                target=catch_up,
                args=(self.descriptors, self.runtime),
                name="firefly-catch-up",
                daemon=True,
            )
            self.catch_up.start()

    def _start_steering(self) -> None:
        """Watch the control store for triggers and for backfills, a thread each."""
        if self.control is None:
            return
        for name, watch in (("triggers", watch_triggers), ("backfills", watch_backfills)):
            thread = threading.Thread(
                target=watch,
                args=(self.descriptors, self.runtime, self.control),
                kwargs={"mark": self.mark},
                name=f"firefly-{name}",
                daemon=True,
            )
            thread.start()
            self.steering.append(thread)

    def request_stop(self) -> None:
        """Ask the host to stop (what SIGTERM/SIGINT do); a second call skips the grace."""
        self.stop.request()

    def run_until_stopped(self, *, handle_signals: bool = True) -> int:
        """Start, block until SIGTERM/SIGINT (or `request_stop`), shut down; return 0."""
        if not handle_signals:
            return self._run()
        with stop_on_signals(self.stop):
            status = self._run()
        ignore_stop_signals()
        return status

    def _run(self) -> int:
        if not self.stop.requested:  # a signal during boot: do not start at all
            self.start()
        self.stop.wait(math.inf)
        log_stop_request(self.stop)
        return self.shutdown()

    def shutdown(self) -> int:
        """Stop new fires, wait up to the grace period, release and close; return 0.

        Does not return when bodies had to be abandoned: the process exits 0 at once.
        """
        self.runtime.stop_accepting()
        if self.mark is not None:  # the loops following it see the stop now
            self.mark.wake()
        if self.schedule_watch is not None:
            self.schedule_watch.stop()
        if self.scheduler.running:
            # Pause, then wait for a job-processing pass already under way (`get_jobs`
            # takes the job-store lock it holds): shutting down in the middle of one
            # makes APScheduler's thread die on removing a finished one-shot job.
            self.scheduler.pause()
            self.scheduler.get_jobs()
            self.scheduler.shutdown(wait=False)
        abandoned = drain(self.runtime, self.grace_period, self.stop)
        if abandoned:
            exit_abandoning()  # never closes the lock: that would free the bodies' locks
        self.runtime.close()
        if self._watching is not None:  # a read under way ends before its store closes
            self._watching.join(timeout=WATCH_SECONDS)
        if self.control is not None:
            self.control.close()
        logger.info("resident host stopped")
        return 0
