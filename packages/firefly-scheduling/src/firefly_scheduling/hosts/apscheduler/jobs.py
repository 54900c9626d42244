# Generated from jobs_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""Attach firefly tasks to an APScheduler 3 scheduler (the resident and library hosts).

Each task becomes one APScheduler job whose function builds the `Fire` and calls
`execute_fire`:

* `fixed_rate`: an `EpochAlignedRateTrigger`, start to start, with
  `max_instances=1` (a run longer than the rate makes the next fires skip rather
  than overlap on this node) and `coalesce=True` (fires missed while the process
  stalled run once, not as a burst). A task with `overlap=` other than `skip` lets
  as many go as its policy needs (`tasks.overlap.runs_per_node`): its fire reaches
  the fire runner, whose `when_held` policy decides, fleet-wide.
* cron: a `CronScheduleTrigger` with the same two settings.
* `fixed_delay`: end to start. The job is a one-shot `DateTrigger`; when a run ends,
  the job re-adds itself for `end + delay`. The first run is as soon as the host
  starts.
* `retries=`: a fire whose run failed adds a one-shot job for its retry
  (`hosts.apscheduler.retries`), and every node learns of the fleet's pending
  retries from the run history (`hosts.apscheduler.retry_sweep`).
* `jitter=`: the trigger wakes the job at each instant plus its offset
  (`JitteredTrigger`; a `fixed_delay` job's `DateTrigger` likewise), and the fire is
  still named by its instant.

Missed fires (the process stalled: a GC pause, `SIGSTOP`, a frozen VM, a saturated
pool) never come as a burst, and how late is too late is decided in one place, the
fire runner's grace (`firefly.scheduling.fires.grace`):

* `coalesce=True`: APScheduler runs a job whose several run times passed once, not
  once per missed time;
* a recurring job names its fire from the clock when it runs (the latest instant of
  its schedule at or before now), so the one catch-up run is the fire due now, on
  the instant every other node names too (its claim decides who runs it);
* the instants a job passed over that way (coalesced, or dropped while its previous
  run still went) are recorded as skipped by this node (`FireRunner.record_passed_over`),
  so a fire every node passed over still says why it did not run;
* a job's first run in a process (a node started or restarted) does the same for
  every scheduled instant without a record in the span of the task's newest history
  records, and after the newest: the fires of an outage of the whole fleet (every
  node stopped, stalled or restarting) are recorded by the first node back, even
  where a `tick` host recorded later fires meanwhile (for a task with `catchup=`,
  only those older than its window: the ones inside are catch-up's);
* `misfire_grace_time=None`: APScheduler never drops a late run by itself; a
  second limit there would skip fires unrecorded, by another rule than the one
  every host and the run history share. A `fixed_delay` run stalled beyond grace
  is skipped as too late by the runner, and the next one is scheduled `delay` later.

Jobs hold live objects, so they belong in a memory job store, the default.

Written once, for asyncio (`AsyncIOScheduler`: each job is awaited on the
scheduler's event loop), in `hosts/apscheduler/jobs_async.py`; the synchronous flavour in
`hosts/apscheduler/jobs.py` (a threaded scheduler) is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from firefly_scheduling.fires.outcome import Fire, TriggerKind
from firefly_scheduling.hosts.apscheduler.retries import schedule_retry
from firefly_scheduling.hosts.apscheduler.retry_sweep import RetrySweep
from firefly_scheduling.hosts.apscheduler.triggers import (
    CronScheduleTrigger,
    EpochAlignedRateTrigger,
    FireTrigger,
    JitteredTrigger,
)
from firefly_scheduling.hosts.observation.observers import PreclaimedFire
from firefly_scheduling.hosts.runtime.execute import execute_fire
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime
from firefly_scheduling.schedule.next_fire import cron_schedule_of
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.overlap import runs_per_node

logger = logging.getLogger("firefly_scheduling.hosts")

JOB_ID_PREFIX = "firefly-scheduling:"
JOB_OPTIONS: dict[str, Any] = {"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
#: The reason recorded for a scheduled instant the job passed over on this node.
PASSED_OVER_REASON = (
    "passed over on this node: its previous run still went, or the node was late and "
    "ran the newest due fire instead"
)
#: The reason recorded for an instant with no record, found by the first run of its
#: job in a (re)started node among the task's recent records: no node ran it.
UNRECORDED_BEFORE_START_REASON = (
    "no node ran it: nothing was recorded for it when a node started (the fleet was "
    "stopped, stalled or restarting, or its nodes fell behind)"
)
#: At most this many passed-over instants are recorded per run of the job, the
#: newest ones (a node suspended for a day, or a fleet down for a week, must not write
#: a million records when it wakes); 1000 covers a 100 s stall of a 100 ms task.
MAX_PASSED_OVER_RECORDED = 1000
#: How many of the task's newest records the first run of a job in a process reads to
#: find the fires nobody ran: it looks at the span they cover, gaps included, so a gap
#: behind newer records (a `tick` host kept running one fire per tick) is found too.
GAP_SCAN_RECORDS = 100
_MICROSECOND = timedelta(microseconds=1)


def trigger_for(descriptor: ScheduledDescriptor) -> FireTrigger:
    """The recurring trigger of a `fixed_rate` or cron task (woken after its jitter offset)."""
    trigger: FireTrigger
    if descriptor.cron is not None:
        trigger = CronScheduleTrigger(cron_schedule_of(descriptor))
    elif descriptor.fixed_rate is not None:
        trigger = EpochAlignedRateTrigger(descriptor.fixed_rate)
    else:
        raise ValueError(f"{descriptor.target}: a fixed_delay task has no recurring trigger")
    if descriptor.jitter is None:
        return trigger
    return JitteredTrigger(trigger, descriptor.target, descriptor.jitter)


@dataclass(frozen=True)
class _PassedOver:
    """The instants after `since` a run of the job records as skipped, with `reason`.

    `recorded`: instants the task's history holds already, which are left alone.
    """

    since: datetime
    reason: str
    recorded: frozenset[datetime] = frozenset()


class RecurringFire:
    """The job function of a `fixed_rate` or cron task."""

    def __init__(
        self,
        descriptor: ScheduledDescriptor,
        trigger: FireTrigger,
        runtime: TaskRuntime,
        *,
        scheduler: Any = None,
        kind: TriggerKind = TriggerKind.SCHEDULED,
    ) -> None:
        self.descriptor = descriptor
        self.trigger = trigger
        self.runtime = runtime
        #: What makes its fires: its schedule (`scheduled`), or a runtime schedule's.
        self.kind = kind
        #: Where a retry's one-shot job is added (`retries`); None: the job is called
        #: on its own (tests), and a task with `retries=` is refused here.
        self.scheduler = scheduler
        if scheduler is None and descriptor.retries:
            raise ValueError(f"{descriptor.target}: a task with retries= needs the scheduler")
        self._last: datetime | None = None
        # Fires claimed by the host, oldest first; each is taken by the next call.
        self._preclaimed: deque[PreclaimedFire] = deque()

    @property
    def claimable_ahead(self) -> bool:
        """Whether a host may claim this job's fires before calling it (`claim_first`):
        a locked task without an initial delay (the delay's gate comes before a claim)."""
        return self.descriptor.lock_name is not None and self.descriptor.initial_delay is None

    def due_instant(self) -> datetime:
        """The fire due now: the latest instant of the schedule at or before now."""
        return self.trigger.fire_at_or_before(self.runtime.wall_now())

    def fire_at(self, instant: datetime) -> Fire:
        """The fire of this job's task at `instant`, made by what makes this job's fires."""
        return Fire.at(self.descriptor, instant, self.kind)

    def hand(self, preclaimed: PreclaimedFire) -> None:
        """Make the next call run `preclaimed`, claimed by the host already.

        The host hands a fire to the job just before it calls it, so each call takes
        the oldest fire handed (calls of an `overlap=` task may run at once).
        """
        self._preclaimed.append(preclaimed)

    def __call__(self) -> None:
        # APScheduler does not pass the scheduled time to the job; the trigger names it.
        preclaimed = self._preclaimed.popleft() if self._preclaimed else None
        fire = preclaimed.fire if preclaimed is not None else self.fire_at(self.due_instant())
        passed = self._named_before(fire.instant)
        try:
            result = execute_fire(fire, self.runtime, preclaimed=preclaimed)
            schedule_retry(self.scheduler, result, self.runtime)
        finally:
            if passed is not None:
                self._record_passed_over(passed, fire.instant)

    def _named_before(self, instant: datetime) -> _PassedOver | None:
        """The instants before `instant` this run must record as passed over, and why.

        APScheduler runs the job once for several due times (`coalesce`) and drops a
        due time while the previous run still goes (`max_instances=1`), silently:
        without recording them, a fire every node passed over (a loaded fleet, a
        short rate) would be neither run nor recorded. On the job's first run in this
        process there is no last instant: it reads the task's newest records (before
        the fire: after it, the newest record would be this fire's own), and every
        scheduled instant in the span they cover that has no record, and every one
        after the newest, is a fire nobody ran. So a node that starts after the whole
        fleet was down says which fires nobody ran, even where a `tick` host recorded
        later ones meanwhile. A skip writes only where nothing is recorded, so an
        instant another node is running right now keeps its run.
        Only `max_instances=1` calls run at once (more for an `overlap=` task, whose
        calls may then read the same `_last`: an instant passed over twice is
        recorded once, a skip writes only where nothing is), so `_last` needs no lock.
        A runtime schedule's job skips that first read: the instants before it was
        added (or added again, after a removal) are no fires nobody ran.
        """
        last, self._last = self._last, instant
        if last is not None:
            return _PassedOver(last, PASSED_OVER_REASON) if instant > last else None
        if self.kind is TriggerKind.RUNTIME:
            return None
        try:
            runner = self.runtime.fire_runner.get()
            recorded = runner.recent_recorded_instants(self.descriptor, GAP_SCAN_RECORDS)
        except Exception:  # the lock or history could not be built: the fire says why
            logger.exception("%s: the recent recorded fires are unknown", self.descriptor.target)
            return None
        earlier = [at for at in recorded if at < instant]
        if not earlier:
            return None
        return _PassedOver(min(earlier), UNRECORDED_BEFORE_START_REASON, frozenset(recorded))

    def _record_passed_over(self, passed: _PassedOver, instant: datetime) -> None:
        """Record as skipped the scheduled instants of `passed` before `instant`.

        Called after the fire due at `instant`, never before it: a node back from an
        outage has up to `MAX_PASSED_OVER_RECORDED` of them per task, and its first
        fires must not wait for those writes (`benchmarks/fleet.py`).
        """
        instants = [
            at for at in self._instants_between(passed.since, instant) if at not in passed.recorded
        ]
        window = self.descriptor.catchup
        if window is not None and passed.reason == UNRECORDED_BEFORE_START_REASON:
            # The instants of its catch-up window are catch-up's (`hosts.runtime.catch_up`).
            start = self.runtime.wall_now() - timedelta(seconds=window)
            instants = [at for at in instants if at <= start]
        if not instants:
            return
        if passed.reason == PASSED_OVER_REASON:
            self.runtime.passed_over.add(self.descriptor.target, len(instants))
        fires = [self.fire_at(at) for at in instants]
        try:
            runner = self.runtime.fire_runner.get()
            runner.record_passed_over(fires, passed.reason)
        except Exception:  # the lock or history could not be built: the fire says why
            logger.exception("%s: passed-over fires unrecorded", self.descriptor.target)

    def _instants_between(self, last: datetime, instant: datetime) -> list[datetime]:
        """The scheduled instants strictly between `last` and `instant`, oldest first.

        Walked back from `instant`, so the bound keeps the newest ones and a long
        outage costs `MAX_PASSED_OVER_RECORDED` steps, not one per instant missed.
        """
        passed: list[datetime] = []
        previous = self.trigger.fire_at_or_before(instant - _MICROSECOND)
        while previous > last and len(passed) < MAX_PASSED_OVER_RECORDED:
            passed.append(previous)
            previous = self.trigger.fire_at_or_before(previous - _MICROSECOND)
        passed.reverse()
        return passed

    def __repr__(self) -> str:
        return self.descriptor.target


class FixedDelayFire:
    """The job function of a `fixed_delay` task: it re-adds itself when a run ends."""

    def __init__(
        self,
        scheduler: Any,
        descriptor: ScheduledDescriptor,
        runtime: TaskRuntime,
        job_id: str,
        *,
        kind: TriggerKind = TriggerKind.SCHEDULED,
    ) -> None:
        self.scheduler = scheduler
        self.descriptor = descriptor
        self.runtime = runtime
        self.job_id = job_id
        self.kind = kind
        if descriptor.fixed_delay is None:
            raise ValueError(f"{descriptor.target} is not a fixed_delay task")
        self.delay = timedelta(seconds=descriptor.fixed_delay)
        #: Set by `detach_task`: the job is not scheduled again.
        self.detached = False

    def schedule(self, at: datetime) -> None:
        # Imported here: apscheduler.triggers.date pulls in asyncio, and `register` is
        # exported from the package root, whose import must stay light.
        from apscheduler.triggers.date import DateTrigger  # noqa: PLC0415 - see above

        # A jittered fire wakes at its offset, and keeps `at` as its instant.
        wake_up = Fire.at(self.descriptor, at, self.kind).due
        self.scheduler.add_job(
            job_function(self),
            DateTrigger(run_date=wake_up),
            kwargs={"instant": at},
            id=self.job_id,
            name=self.descriptor.target,
            replace_existing=True,
            **JOB_OPTIONS,
        )
        if self.detached:  # `detach_task` ran while it was being added: it did not see it
            self.scheduler.remove_job(self.job_id)

    def __call__(self, instant: datetime) -> None:
        try:
            fire = Fire.at(self.descriptor, instant, self.kind)
            result = execute_fire(fire, self.runtime)
            schedule_retry(self.scheduler, result, self.runtime)
        finally:
            # The previous one-shot job is already gone: APScheduler removes it when it
            # submits the run, under the job-store lock that `add_job` also takes. A job
            # detached meanwhile (`detach_task`: its runtime schedule was removed) stops.
            if self.runtime.accepting and not self.detached:
                self.schedule(self.runtime.wall_now() + self.delay)

    def __repr__(self) -> str:
        return self.descriptor.target


def attach_tasks(
    scheduler: Any, descriptors: Sequence[ScheduledDescriptor], runtime: TaskRuntime
) -> list[str]:
    """Add one job per task to `scheduler` (running or not); return the job ids.

    Nothing is resolved here: the lock, the store and the task's module are reached
    on the first fire (or at boot, when the host built its runtime eagerly).
    """
    job_ids: list[str] = []
    taken: set[str] = set()
    for descriptor in descriptors:
        job_id = _unique(JOB_ID_PREFIX + descriptor.target, taken)
        taken.add(job_id)
        attach_task(scheduler, descriptor, runtime, job_id)
        job_ids.append(job_id)
    # Retries pending anywhere in the fleet, read from the history (none: no job).
    RetrySweep(scheduler, descriptors, runtime).attach()
    return job_ids


def attach_task(
    scheduler: Any,
    descriptor: ScheduledDescriptor,
    runtime: TaskRuntime,
    job_id: str,
    *,
    kind: TriggerKind = TriggerKind.SCHEDULED,
) -> None:
    """Add the one job of `descriptor` under `job_id` (replacing a job of that id).

    `kind` says what makes its fires: `runtime` for a runtime schedule's task.
    """
    if descriptor.fixed_delay is not None:
        fixed_delay = FixedDelayFire(scheduler, descriptor, runtime, job_id, kind=kind)
        fixed_delay.schedule(runtime.wall_now())
        return
    trigger = trigger_for(descriptor)
    recurring = RecurringFire(descriptor, trigger, runtime, scheduler=scheduler, kind=kind)
    scheduler.add_job(
        job_function(recurring),
        trigger,
        id=job_id,
        name=descriptor.target,
        replace_existing=True,
        **{**JOB_OPTIONS, "max_instances": runs_per_node(descriptor.overlap)},
    )


def detach_task(scheduler: Any, job_id: str) -> None:
    """Remove the job `job_id`: no fire of it starts from now (a running one finishes).

    A `fixed_delay` job between two runs is gone at once; one running now is marked so
    that it does not schedule itself again when it ends.
    """
    # Imported here, as in `FixedDelayFire.schedule`: the package root stays light.
    from apscheduler.jobstores.base import JobLookupError  # noqa: PLC0415 - see above

    job = scheduler.get_job(job_id)
    function = None if job is None else job.func
    owner = getattr(function, "__self__", function)  # a bound `__call__`, or the job itself
    if isinstance(owner, FixedDelayFire):
        owner.detached = True
    # A running fixed_delay job has no job to remove: it is marked, and adds none again.
    with contextlib.suppress(JobLookupError):
        scheduler.remove_job(job_id)


def _unique(job_id: str, taken: set[str]) -> str:
    candidate, suffix = job_id, 2
    while candidate in taken:
        candidate, suffix = f"{job_id}#{suffix}", suffix + 1
    return candidate


def job_function(job: RecurringFire | FixedDelayFire) -> Callable[..., object]:
    """What APScheduler is given to call for `job`.

    An `AsyncIOScheduler` awaits a job on its loop only when the function is itself a
    coroutine function: a bound coroutine method is, an object is not (it would run
    in a worker thread and its coroutine would never be awaited).
    """
    return job
