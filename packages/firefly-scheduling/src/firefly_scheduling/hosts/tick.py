"""The cron-driven host behind `firefly-scheduling tick`: one pass per minute.

crontab or a Kubernetes CronJob starts a fresh process every minute. The process
runs every task due in the current UTC minute and exits:

* a cron task when its schedule matches the minute (in its zone);
* a `fixed_rate`/`fixed_delay` task on its `Cadence` bucket (rounded up, aligned to
  the Unix epoch): a bucket of a minute or more when the minute is aligned to it;
  a sub-minute bucket at each of its instants in the minute, the process sleeping
  between them until the minute ends.

A task with `jitter=` keeps its slots in the minute of their instants, and each
starts at its instant plus its offset (`Fire.due`): the pass sleeps until then, so
it may last up to the task's jitter past its minute (the next minute's process runs
meanwhile; claims keep each fire to one node). The slot's width counts from there.

A slot that passed entirely before the process started is skipped (a tick started
at :25 runs a 10 s task at :20, :30, :40 and :50); a minute-or-longer task's slot is
the whole minute. Runs of one task never overlap in a process: a slot whose
previous run is still going is skipped (a task with `overlap=` other than `skip`
hands it to the fire runner instead, whose policy decides, fleet-wide). The process
waits for running bodies, then returns; a failing body is logged by the fire runner
and does not change the exit code. Time comes from a `Clock`, so tests do not wait for real minutes.

The pass's report (`TickReport`: results, slots not run, exit status) is
`hosts.tick_report`'s.

The runtime schedules (`firefly-scheduling schedules add`) are read from the control
store once per pass, before it plans, and run like the code's tasks.

A task with `retries=` has its retries run in the same pass: the fire's worker
sleeps until each retry is due and runs it (`fires.retries`), so a pass may last
until the last retry; a retry is due before the task's next fire or not at all, so
at most until then. A stop request drops the retries not yet started. A fire whose
last retry failed makes the pass exit 1; a failure followed by its retry does not.

A task with `catchup=` has the fires the whole fleet missed before the pass's minute
run once, oldest first (`hosts.runtime.catch_up`), once the pass's slots are done
(so a catch-up run never holds a task lock when its slot comes); their results are
the pass's.

Given a control store, the pass then runs the manual triggers pending for its tasks
and drives their backfills (`hosts.runtime.steering`); their results are the pass's.
A backfill longer than the minute goes on in this process past the minute (the
next minute's process finds its lease held and leaves it).

A stop request (SIGTERM/SIGINT, see `hosts.runtime.shutdown`) ends the pass early: no
further slot starts, running bodies get `grace_period` seconds to finish, then the
report says what was not started and what was abandoned.

Planning is grouped and cheap: tasks sharing a cron expression and zone are
matched once, through a prefilter that rules most minutes out without a croniter
search (`cron_prefilter`), and tasks sharing a cadence are aligned once, so ten
thousand tasks cost a few milliseconds per minute.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from firefly_scheduling.control.runtime_tasks import RuntimeTask
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.fires.outcome import Fire, FireResult, TriggerKind
from firefly_scheduling.hosts.runtime.catch_up import CatchUpReport, catch_up
from firefly_scheduling.hosts.runtime.clock import Clock, SystemClock
from firefly_scheduling.hosts.runtime.execute import execute_fire
from firefly_scheduling.hosts.runtime.shutdown import (
    DEFAULT_GRACE_PERIOD_SECONDS,
    POLL_SECONDS,
    StopRequest,
    drain,
    log_stop_request,
)
from firefly_scheduling.hosts.runtime.steering import run_backfills, run_triggers
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime
from firefly_scheduling.hosts.runtime.workers import (
    TICK_MAX_WORKERS,
    checked_max_workers,
    worker_count,
)
from firefly_scheduling.hosts.tick_report import (
    ABANDONED_REASON,
    MISSED_SLOT_REASON,
    NOT_STARTED_REASON,
    OVERLAPPING_SLOT_REASON,
    PROBLEM_VERDICTS,
    TickReport,
    TickSlot,
)
from firefly_scheduling.schedule.cadence import Cadence
from firefly_scheduling.schedule.cron_prefilter import MinutePrefilter, WallClock
from firefly_scheduling.schedule.fire_instants import minute_start
from firefly_scheduling.schedule.next_fire import cadence_of, cron_schedule_of
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.overlap import runs_per_node

__all__ = [
    "ABANDONED_REASON",
    "MISSED_SLOT_REASON",
    "NOT_STARTED_REASON",
    "OVERLAPPING_SLOT_REASON",
    "PROBLEM_VERDICTS",
    "TickHost",
    "TickReport",
    "TickSlot",
    "as_run_under_tick",
]

logger = logging.getLogger("firefly_scheduling.hosts")

_MINUTE = timedelta(minutes=1)
_MICROSECOND = timedelta(microseconds=1)


def as_run_under_tick(descriptor: ScheduledDescriptor) -> ScheduledDescriptor:
    """A `fixed_delay` task as `tick` really runs it: a fixed rate on its cadence bucket.

    Under `tick` its instants are the bucket's, aligned to the epoch and the same on
    every node, so its fires take a claim like any `fixed_rate` fire; as a
    `fixed_delay` (per-node instants, no claim) every tick process of a minute
    would run it once.
    """
    if descriptor.fixed_delay is None:
        return descriptor
    return replace(descriptor, fixed_rate=descriptor.fixed_delay, fixed_delay=None)


class TickHost:
    """Plans and runs one minute of tasks."""

    def __init__(
        self,
        descriptors: Sequence[ScheduledDescriptor],
        runtime: TaskRuntime,
        *,
        clock: Clock | None = None,
        max_workers: int | None = None,
        grace_period: float = DEFAULT_GRACE_PERIOD_SECONDS,
        stop: StopRequest | None = None,
        control: ControlStore | None = None,
        runtime_tasks: Sequence[RuntimeTask] = (),
    ) -> None:
        """`runtime_tasks`: the runtime schedules read for this pass
        (`hosts.runtime.schedule_watch.read_runtime_tasks`), run like the code's tasks."""
        self.runtime = runtime
        self.descriptors = tuple(descriptors)
        self.control = control
        self.clock = clock or SystemClock()
        runtime.now = self.clock.now  # fires are judged late or not by the host's clock
        self.max_workers = checked_max_workers(max_workers)
        self.grace_period = grace_period
        self.stop = stop or StopRequest()
        self.stop.add_listener(self.clock.interrupt)  # a stop ends the sleep between slots
        self._crons: dict[
            tuple[str, str | None, str | None, str | None],
            tuple[MinutePrefilter, list[ScheduledDescriptor]],
        ] = {}
        self._cadences: dict[Cadence, list[ScheduledDescriptor]] = defaultdict(list)
        self._catching_up = [d for d in descriptors if d.catchup is not None]
        #: The names of the runtime schedules' tasks: their fires are made `runtime`.
        self._runtime_names = frozenset(task.name for task in runtime_tasks)
        for task in runtime_tasks:
            runtime.callables.alias(task.name, task.callable_target)
        for descriptor in (*descriptors, *(task.task for task in runtime_tasks)):
            if descriptor.cron is not None:
                key = (descriptor.cron, descriptor.zone, descriptor.dst_gap, descriptor.dst_fold)
                if key not in self._crons:
                    self._crons[key] = (MinutePrefilter(cron_schedule_of(descriptor)), [])
                self._crons[key][1].append(descriptor)
            else:
                self._cadences[cadence_of(descriptor)].append(as_run_under_tick(descriptor))

    def plan(self, minute: datetime) -> list[TickSlot]:
        """Every slot of the UTC minute starting at `minute`, in order of start (`due`)."""
        slots: list[TickSlot] = []
        wall_clocks: dict[ZoneInfo, WallClock] = {}
        for prefilter, descriptors in self._crons.values():
            zone = prefilter.schedule.zone
            wall = wall_clocks.get(zone)
            if wall is None:
                wall = wall_clocks[zone] = WallClock.of(minute, zone)
            if prefilter.fires_at(minute, wall):
                slots.extend(TickSlot(self._fire(d, minute), _MINUTE) for d in descriptors)
        for cadence, descriptors in self._cadences.items():
            width = min(timedelta(seconds=cadence.seconds), _MINUTE)
            for instant in cadence.fires_within_minute(minute):
                slots.extend(TickSlot(self._fire(d, instant), width) for d in descriptors)
        slots.sort(key=lambda slot: (slot.fire.due, slot.fire.target))
        return slots

    def _fire(self, descriptor: ScheduledDescriptor, instant: datetime) -> Fire:
        runtime = descriptor.target in self._runtime_names
        return Fire.at(
            descriptor, instant, TriggerKind.RUNTIME if runtime else TriggerKind.SCHEDULED
        )

    def request_stop(self) -> None:
        """Start no further slot (what SIGTERM/SIGINT do); a second call ends the grace."""
        self.stop.request()

    def run(self) -> TickReport:
        """Run the current minute's slots from now on; wait for the bodies; report.

        After a stop request: no further slot starts, and running bodies get the
        grace period; the ones still running then are in `report.abandoned`, and
        their threads are left running (the caller should exit the process).
        """
        now = self.clock.now()
        report = TickReport(minute_start(now))
        slots = self.plan(report.minute)
        report.missed = [slot for slot in slots if slot.ends_at <= now]
        pending = [slot for slot in slots if slot.ends_at > now]
        if pending:
            self._run_slots(pending, report)
        elif self.stop.requested:
            log_stop_request(self.stop)
        catching_up = None if self.stop.requested else self._start_catch_up(report.minute)
        if catching_up is not None:
            self._end_catch_up(catching_up, report)
        if self.control is not None and not self.stop.requested:
            self._steer(self.control, report)
        report.stopped = self.stop.requested
        return report

    def _steer(self, control: ControlStore, report: TickReport) -> None:
        """Run the pending triggers, then drive the backfills, of this pass's tasks."""
        report.results.extend(run_triggers(self.descriptors, self.runtime, control))
        for progress in run_backfills(self.descriptors, self.runtime, control):
            report.results.extend(progress.results)

    def _start_catch_up(self, minute: datetime) -> Future[list[CatchUpReport]] | None:
        """Catch up the missed fires of the `catchup=` tasks before `minute` (the
        pass's own slots are its own), once the slots are done: a catch-up run holding
        a task lock would make the slot of that task skip as overlapping."""
        if not self._catching_up:
            return None
        pool = ThreadPoolExecutor(1, thread_name_prefix="firefly-catch-up")
        until = minute - _MICROSECOND
        try:
            return pool.submit(catch_up, self._catching_up, self.runtime, until=until)
        finally:
            pool.shutdown(wait=False)

    def _end_catch_up(self, catching_up: Future[list[CatchUpReport]], report: TickReport) -> None:
        """Wait for the catch-up (a stop request ends it between two fires); its
        fires' results join the pass's."""
        while not catching_up.done():
            try:
                catching_up.result(timeout=POLL_SECONDS)
            except FutureTimeout:
                if self.stop.requested:
                    self.runtime.stop_accepting()
        for caught_up in catching_up.result():
            report.results.extend(caught_up.results)

    def _run_slots(self, pending: list[TickSlot], report: TickReport) -> None:
        tasks = {slot.fire.target: slot.fire.task.overlap for slot in pending}
        threads = sum(runs_per_node(overlap) for overlap in tasks.values())
        workers = worker_count(self.max_workers, threads, TICK_MAX_WORKERS)
        running: dict[str, Future[list[FireResult]]] = {}
        submitted: list[tuple[Future[list[FireResult]], Fire]] = []
        pool = ThreadPoolExecutor(workers, thread_name_prefix="firefly-tick")
        try:
            for index, slot in enumerate(pending):
                self.clock.sleep((slot.fire.due - self.clock.now()).total_seconds())
                if self.stop.requested:
                    report.not_started = pending[index:]
                    break
                previous = running.get(slot.fire.target)
                alone = runs_per_node(slot.fire.task.overlap) == 1  # else the runner decides
                if alone and previous is not None and not previous.done():
                    logger.info(
                        "%s: slot %s skipped, the previous run is still going",
                        slot.fire.target,
                        slot.fire.instant.isoformat(timespec="seconds"),
                    )
                    report.overlapping.append(slot)
                    self._record_overlapping(slot)
                    continue
                future = pool.submit(self._fire_with_retries, slot.fire)
                running[slot.fire.target] = future
                submitted.append((future, slot.fire))
            while not self.stop.requested:
                if not wait([each for each, _ in submitted], timeout=POLL_SECONDS).not_done:
                    break
            if self.stop.requested:
                log_stop_request(self.stop)
                report.abandoned = drain(self.runtime, self.grace_period, self.stop)
        finally:
            # Abandoned bodies keep their threads: waiting for them is what the
            # grace period refused to do.
            pool.shutdown(wait=not report.abandoned, cancel_futures=True)
        for future, fire in submitted:
            if not future.done() or future.cancelled():
                continue
            error = future.exception()
            if error is None:
                report.results.extend(future.result())
            else:  # logged, counted, never the whole pass's end
                logger.error("a fire failed outside its task body: %s", error, exc_info=error)
                report.crashed_fires.append((fire, f"{type(error).__name__}: {error}"))

    def _fire_with_retries(self, fire: Fire) -> list[FireResult]:
        """Run `fire`, then each retry its failures ask for, once due; every result.

        A stop request drops the retry not yet started: the last result then asks for
        none, so the pass reports its failure.
        """
        results = [execute_fire(fire, self.runtime)]
        while (retry := results[-1].retry) is not None:
            self.clock.sleep((retry.due - self.clock.now()).total_seconds())
            if self.stop.requested:
                logger.warning(
                    "%s: fire %s: %s not run: the pass was asked to stop",
                    retry.target,
                    retry.instant.isoformat(),
                    retry.retry,
                )
                results[-1] = replace(results[-1], retry=None)
                break
            results.append(execute_fire(retry, self.runtime))
        return results

    def _record_overlapping(self, slot: TickSlot) -> None:
        """Record the slot as skipped: a fire no node runs must still say why."""
        try:
            self.runtime.fire_runner.get().record_passed_over([slot.fire], OVERLAPPING_SLOT_REASON)
        except Exception:  # the lock or history could not be built: logged, the pass goes on
            logger.exception("%s: skipped slot unrecorded", slot.fire.target)
