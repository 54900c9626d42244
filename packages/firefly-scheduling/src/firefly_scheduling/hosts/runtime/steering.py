# Generated from steering_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""Steering a host: it runs the manual triggers and backfills asked of its tasks.

Every host that runs tasks reads the control store (`control.store`): a resident
host (threaded or asyncio) whenever the store's change mark moved, checked every
`POLL_SECONDS` (`hosts.runtime.change_mark`), `tick` once per pass.

* Triggers (`run_triggers`): one read lists the pending triggers; each trigger of
  this host's tasks runs at once through `execute_fire`, as a `manual` fire named by the
  trigger's time on the store's clock, due when run (`Fire.asked_at`): claim, task
  lock (its `overlap=`), history, like any fire. The fire's claim gives it to one
  node of the fleet, which removes the trigger once its fire ran or was recorded
  with why not; until then it stays stored, and is tried again.
* Backfills (`run_backfills`): one node at a time drives a request, holding the
  lease `firefly-backfill:<digest>` on the task lock's backend for the task's
  `lock_ttl` (kept alive while it runs). It reads the window's successful instants,
  and those whose run runs or expired, once (`fires.backfill_plan`), then runs each other
  instant of the schedule,
  oldest first, one at a time and at most `BACKFILL_RATE` per second, as a
  `backfill` fire claimed like any fire (one recorded failed or timed out as the
  attempt after it, `backfill_fire`). A node that dies mid-way leaves its lease to
  lapse, and the next node goes on from the history; an instant the dead node had
  claimed is its own until the claim lapses. An instant held off by a run of its
  task (the task lock busy) is tried again under its claim, backing off, for up to
  the task lock's TTL; past that, the pass ends there, and the instant runs on a
  later poll once its claim lapsed. Once every instant of the window has a run
  recorded (succeeded or not), the request is removed.

A failure of the store or the history is logged and left to the next poll.

Written once, for asyncio, in `hosts/runtime/steering_async.py`; the synchronous
flavour in `hosts/runtime/steering.py` is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final

from firefly_scheduling.control.records import Backfill, Trigger
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.errors import ConfigurationError, FireflySchedulingError
from firefly_scheduling.fires.backfill_plan import instants_to_run, schedule_instants
from firefly_scheduling.fires.history_calls import off_loop
from firefly_scheduling.fires.outcome import Fire, FireResult, TriggerKind, Verdict
from firefly_scheduling.fires.retries import RetryOf
from firefly_scheduling.history.port import (
    PLACEHOLDER_STATES,
    RETRIED_STATES,
    SUCCESS_STATES,
    RunHistory,
    RunState,
)
from firefly_scheduling.hosts.observation.observers import PreclaimedFire
from firefly_scheduling.hosts.runtime.change_mark import FOLLOW_SECONDS, ChangeMark
from firefly_scheduling.hosts.runtime.execute import execute_fire
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime
from firefly_scheduling.locks.hold import hold
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

logger = logging.getLogger("firefly_scheduling.hosts")

#: How often a resident host's loops look at the change mark: a trigger runs within
#: this and the mark's freshness (`MARK_SECONDS`), plus two round trips, of being asked.
POLL_SECONDS: Final = 0.5
#: The most backfill fires one node starts per second (one at a time, oldest first).
BACKFILL_RATE: Final = 100.0
#: The lease of the node driving a backfill, renewed while it runs, for a task without
#: a `lock_ttl` (a task's lease is its lock's TTL: a node that dies is replaced as
#: soon as its task lock would be).
BACKFILL_LEASE_SECONDS: Final = 30.0
#: The first and the longest pause before a backfill instant held off by a run of its
#: task is tried again.
FIRST_PAUSE_SECONDS: Final = 0.05
LAST_PAUSE_SECONDS: Final = 1.0
#: The states of a record whose fire ran (or runs): every state but the placeholders.
RAN_STATES: Final = frozenset(RunState) - PLACEHOLDER_STATES
#: The states of a record a backfill leaves alone: a success, a run still running, and
#: an expired run, whose body may have run to its end (its node died, or its end was
#: never written). A running record of a dead node is closed as `expired` by the next
#: run of its task, and a start cannot take an expired record over: a replay would run
#: the body again under the same attempt, unrecorded as a second run.
NOT_REPLAYED: Final = SUCCESS_STATES | {RunState.RUNNING, RunState.EXPIRED}
_MICROSECOND = timedelta(microseconds=1)
#: The verdicts of a trigger's fire that leave the trigger stored: this node neither
#: ran it nor recorded why not (another node's claim has it, or this host stops, or
#: cannot build its lock, or holds the task back).
_TRIGGER_LEFT: Final = frozenset(
    {Verdict.CLAIMED_ELSEWHERE, Verdict.SHUTTING_DOWN, Verdict.UNAVAILABLE, Verdict.HELD_BACK}
)


def watch_triggers(
    descriptors: Sequence[ScheduledDescriptor],
    runtime: TaskRuntime,
    store: ControlStore,
    *,
    mark: ChangeMark | None = None,
    poll: float = POLL_SECONDS,
) -> None:
    """`run_triggers` whenever the store's change `mark` moved (checked every `poll`
    seconds), and every `poll` while a trigger of this host's tasks is left in the
    store (another node's claim has it, and may die), until the host stops accepting
    fires."""
    pending: set[str] = set()
    changes = (mark or ChangeMark(store)).reader()
    while runtime.accepting:
        if changes.moved() or pending:
            run_triggers(descriptors, runtime, store, pending=pending)
        time.sleep(poll)


def watch_backfills(
    descriptors: Sequence[ScheduledDescriptor],
    runtime: TaskRuntime,
    store: ControlStore,
    *,
    mark: ChangeMark | None = None,
    poll: float = POLL_SECONDS,
) -> None:
    """`run_backfills` every `poll` seconds while a request of this host's tasks is
    stored (another node may drive it, and die), else whenever the `mark` moved,
    until the host stops accepting fires (and wakes the mark).

    Apart from `watch_triggers`: a backfill of thousands of instants runs for
    minutes, and a trigger must not wait for it. It follows the mark that loop
    polls (`AsyncMarkReader.wait_moved`).
    """
    said: dict[str, int] = {}
    pending: set[str] = set()
    changes = (mark or ChangeMark(store)).reader()
    while runtime.accepting:
        due = changes.wait_moved(poll if pending else FOLLOW_SECONDS)
        if (due or pending) and _still_accepting(runtime):
            run_backfills(descriptors, runtime, store, said=said, pending=pending)


def _still_accepting(runtime: TaskRuntime) -> bool:
    """Whether the host still takes fires (it may have stopped while a loop slept)."""
    return runtime.accepting


def manual_fire(descriptor: ScheduledDescriptor, trigger: Trigger, now: datetime) -> Fire:
    """The fire of a taken trigger: named by its time on the store's clock, due `now`."""
    instant = datetime.fromtimestamp(trigger.requested_at, UTC)
    return Fire(descriptor, instant, TriggerKind.MANUAL, asked_at=now, asked_by=trigger.by)


def backfill_fire(
    request: Backfill,
    descriptor: ScheduledDescriptor,
    instant: datetime,
    failed_attempt: int | None,
    now: datetime,
) -> Fire:
    """The backfill fire of `instant`, due `now`.

    An instant whose record is a failed (or timed out) attempt `n` is run as the
    attempt after it: its start takes that record over (`RetryStartingHistory`), as a
    retry's does, under a claim of its own (`~retry<n>`); any other has no record, or
    one a start replaces (a skip).
    """
    if failed_attempt is None:
        return Fire(descriptor, instant, TriggerKind.BACKFILL, asked_at=now, asked_by=request.by)
    again = RetryOf(failed_attempt, failed_attempt, now, after_attempt=failed_attempt)
    return Fire(descriptor, instant, TriggerKind.BACKFILL, again, asked_at=now, asked_by=request.by)


def backfill_lease_name(request: Backfill) -> str:
    """The lease the node driving `request` holds: one per task and window."""
    return f"firefly-backfill:{request.key[:32]}"


@dataclass
class BackfillProgress:
    """What driving one backfill request did on this node."""

    request: Backfill
    #: Instants of the window without a success when it started here.
    pending: int = 0
    results: list[FireResult] = field(default_factory=list)
    #: Whether every instant of the window has a run recorded: the request is removed.
    done: bool = False


def run_triggers(
    descriptors: Sequence[ScheduledDescriptor],
    runtime: TaskRuntime,
    store: ControlStore,
    *,
    pending: set[str] | None = None,
) -> list[FireResult]:
    """Run every pending trigger of this host's tasks, oldest first; the results of
    those whose fire this node's claim won.

    A trigger stays in the store until its fire is run, or recorded with why not, by
    the node whose claim won it (named by the trigger, its fire runs once across the
    fleet); that node then removes it. A node that loses the claim leaves it, and a
    host stopping before the fire leaves it too: nothing between the store and the
    history loses a trigger (a take whose reply was lost did). A trigger whose
    claimer died before its fire was recorded runs once its claim lapsed (its record
    refuses a second start where the fire ran). `pending` (kept by a caller that
    polls) is set to the ids of this host's triggers left in the store.
    """
    hosted = {descriptor.target: descriptor for descriptor in descriptors}
    results: list[FireResult] = []
    try:
        stored = store.triggers()
    except FireflySchedulingError as err:
        logger.warning("steering: pending triggers not read: %s", err)
        return results
    mine = [trigger for trigger in stored if trigger.task in hosted]
    if pending is not None:
        pending.clear()
        pending.update(trigger.id for trigger in mine)
    for trigger in mine:
        if not runtime.accepting:
            break
        fire = manual_fire(hosted[trigger.task], trigger, runtime.wall_now())
        result = execute_fire(fire, runtime)
        if result.verdict in _TRIGGER_LEFT:
            continue
        logger.info(
            "%s: manual trigger by %r (asked %s) handled on node %s: %s",
            trigger.task,
            trigger.by,
            fire.instant.isoformat(),
            runtime.node,
            result.verdict,
        )
        results.append(result)
        try:
            store.remove_trigger(trigger)
        except FireflySchedulingError as err:  # tried again: its record refuses a rerun
            logger.warning("%s: trigger handled, not removed yet: %s", trigger.task, err)
            continue
        if pending is not None:
            pending.discard(trigger.id)
    return results


def run_backfills(
    descriptors: Sequence[ScheduledDescriptor],
    runtime: TaskRuntime,
    store: ControlStore,
    *,
    said: dict[str, int] | None = None,
    pending: set[str] | None = None,
) -> list[BackfillProgress]:
    """Drive each backfill request of this host's tasks no other node drives now.

    `said` (kept by a caller that polls) holds how many instants each request had to
    run when last logged: a request stuck on another node's claim is logged once.
    `pending` (likewise) is set to the keys of this host's stored requests: a store
    that could not be read leaves it as it was.
    """
    hosted = {descriptor.target: descriptor for descriptor in descriptors}
    reports: list[BackfillProgress] = []
    try:
        requests = store.backfills()
    except FireflySchedulingError as err:
        logger.warning("steering: backfill requests not read: %s", err)
        return reports
    if pending is not None:
        pending.clear()
        pending.update(request.key for request in requests if request.task in hosted)
    for request in requests:
        descriptor = hosted.get(request.task)
        if descriptor is None or not runtime.accepting:
            continue
        progress = BackfillProgress(request)
        try:
            if _drive(
                descriptor, request, runtime, store, progress, said={} if said is None else said
            ):
                reports.append(progress)
        except ConfigurationError as err:
            logger.error("%s: backfill request dropped: %s", request.task, err)
            _forget(store, request)
        except Exception:  # one request's failure stops only it, until the next poll
            logger.exception("%s: backfill failed; the next poll goes on", request.task)
    return reports


def _drive(
    descriptor: ScheduledDescriptor,
    request: Backfill,
    runtime: TaskRuntime,
    store: ControlStore,
    progress: BackfillProgress,
    *,
    said: dict[str, int],
) -> bool:
    """Run `request`'s pending instants if this node wins its lease; whether it did."""
    runner = runtime.fire_runner.get()
    history, lock = runner.history, descriptor.lock_name
    if history is None:
        raise ConfigurationError("this host has no run history to know what succeeded")
    if lock is None:
        raise ConfigurationError("an unlocked task (lock=False) runs on every node")
    instants = schedule_instants(descriptor, request.start, request.end)
    name = backfill_lease_name(request)
    lease = descriptor.lock_ttl or BACKFILL_LEASE_SECONDS
    with hold(runtime.lock.get(), name, lease, keep_alive=True) as held:
        if not held:
            return False  # another node drives it
        settled = _instants_in(history, descriptor, request, lock, NOT_REPLAYED)
        todo = instants_to_run(instants, settled)
        failed = {
            record.instant: record.attempt
            for record in off_loop(
                history.records_between,
                descriptor.target,
                lock=lock,
                after=request.start - _MICROSECOND,
                until=request.end - _MICROSECOND,
                states=RETRIED_STATES,
            )
        }
        progress.pending = len(todo)
        if todo and said.get(request.key) != len(todo):
            said[request.key] = len(todo)
            logger.info(
                "%s: backfill [%s, %s) by %r: %d of %d instant(s) to run, oldest first",
                request.task,
                request.start.isoformat(),
                request.end.isoformat(),
                request.by,
                len(todo),
                len(instants),
            )
        spacing = 1.0 / BACKFILL_RATE
        for instant in todo:
            if not runtime.accepting or held.lost:
                return True
            started = time.monotonic()
            result = _run_instant(request, descriptor, instant, failed.get(instant), runtime)
            progress.results.append(result)
            if result.verdict is Verdict.OVERLAPPING:
                return True  # the task lock stays busy: no younger instant jumps ahead now
            pause = spacing - (time.monotonic() - started)
            if pause > 0:
                time.sleep(pause)
        ran = _instants_in(history, descriptor, request, lock, RAN_STATES)
        progress.done = set(instants) <= ran
    if progress.done:
        _forget(store, request)
        logger.info(
            "%s: backfill [%s, %s) done", request.task, request.start.isoformat(), request.end
        )
    return True


def _run_instant(
    request: Backfill,
    descriptor: ScheduledDescriptor,
    instant: datetime,
    failed_attempt: int | None,
    runtime: TaskRuntime,
) -> FireResult:
    """Claim the backfill fire of `instant`, then run it; held off by a run of its
    task, try again under the same claim, backing off, for up to the task lock's TTL.

    A claim another node holds makes the fire that node's (`CLAIMED_ELSEWHERE`).
    """
    fire = backfill_fire(request, descriptor, instant, failed_attempt, runtime.wall_now())
    [claim] = runtime.fire_runner.get().claim_fires([fire], task_locks=False)
    if claim.verdict is not Verdict.SUCCEEDED:
        return FireResult(fire, runtime.node, claim.verdict, error=claim.error)
    deadline = time.monotonic() + (descriptor.lock_ttl or 0.0)
    pause = FIRST_PAUSE_SECONDS
    while True:
        ticket = runtime.admit(fire)
        if ticket is None:
            return FireResult(fire, runtime.node, Verdict.SHUTTING_DOWN)
        result = execute_fire(fire, runtime, preclaimed=PreclaimedFire(fire, claim, ticket))
        if result.verdict is not Verdict.OVERLAPPING or time.monotonic() >= deadline:
            return result
        time.sleep(pause)
        pause = min(pause * 2, LAST_PAUSE_SECONDS)


def _instants_in(
    history: RunHistory,
    descriptor: ScheduledDescriptor,
    request: Backfill,
    lock: str,
    states: frozenset[RunState],
) -> set[datetime]:
    """The instants of `request`'s window whose record is in `states`: one read."""
    found: set[datetime] = off_loop(
        history.recorded_instants,
        descriptor.target,
        lock=lock,
        after=request.start - _MICROSECOND,
        until=request.end - _MICROSECOND,
        states=states,
    )
    return found


def _forget(store: ControlStore, request: Backfill) -> None:
    try:
        store.cancel_backfill(request.task, request.start, request.end)
    except FireflySchedulingError as err:
        logger.warning("%s: finished backfill request not removed: %s", request.task, err)
