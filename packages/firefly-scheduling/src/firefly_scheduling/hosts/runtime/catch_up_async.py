# async-to-sync: rename AsyncTaskRuntime TaskRuntime
# async-to-sync: rename firefly_scheduling.hosts.runtime.asyncio_runtime firefly_scheduling.hosts.runtime.task_runtime  # noqa: E501
"""`catch_up`: run the fires of `catchup=` tasks that the whole fleet missed, once each.

A host calls it where fires may have been missed: a resident host (threaded or
asyncio) once as it starts, beside its scheduler; `tick` in every pass, once its
slots are done, for the instants before its minute. For each task with `catchup=`:

1. one read of the run history: the instants of the window `(until - catchup,
   until]` some node ran or recorded (`RunHistory.recorded_instants`);
2. the plan (`fires.catch_up_plan`): every other scheduled instant of the window
   was missed; the newest `catchup_limit` run, the older ones are recorded as
   skipped with the reason, in one batch write (`RunHistory.skip_many`);
3. the fires to run, oldest first, as `TriggerKind.CATCH_UP` fires, in batches of
   `CLAIM_BATCH`: each batch claimed in one request where the backend takes batches
   (`FireRunner.claim_fires`), each fire won then run through `execute_fire` like
   any fire (task lock, adoption, start, body, end), one after the other, since
   they share the task lock. A fire claimed by another node starting at the same
   time is that node's: this one waits for its records before it claims its next
   batch, so the fleet runs the missed fires oldest first (`_wait_for_their_records`).

A stop request ends it between two fires: the fires of the batch it claimed but
did not run are recorded as skipped (`NOT_RUN_REASON`); nobody else could claim them
within their window. A failure of the history read or of the claims is logged and
leaves the task's missed fires to the next host that starts. Without a history
there is nothing to read: boot refuses `catchup=` then (`check_catch_up_history`).

Written once, for asyncio, in `hosts/runtime/catch_up_async.py`; the synchronous
flavour in `hosts/runtime/catch_up.py` is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import asyncio  # sync: drop
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.catch_up_plan import CatchUpPlan, plan_catch_up, window_start
from firefly_scheduling.fires.history_calls_async import off_loop
from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, FireResult, TriggerKind, Verdict
from firefly_scheduling.history.port import RunHistory
from firefly_scheduling.hosts.observation.observers import PreclaimedFire
from firefly_scheduling.hosts.runtime.asyncio_runtime import AsyncTaskRuntime
from firefly_scheduling.hosts.runtime.execute_async import execute_fire
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

logger = logging.getLogger("firefly_scheduling.hosts")

#: How many missed fires one claim request takes.
CLAIM_BATCH = 200
#: The first and the longest pause before a missed fire whose task lock was held is
#: tried again.
FIRST_PAUSE_SECONDS = 0.02
LAST_PAUSE_SECONDS = 1.0
#: A claim this node won.
WON = Verdict.SUCCEEDED
#: Why a fire this node claimed for catch-up, then did not run, is recorded as skipped.
NOT_RUN_REASON = "claimed for catch-up, then this node stopped before running it"
#: Why a missed fire another node claimed, then did not run, is recorded as skipped.
CLAIMED_NOT_RUN_REASON = (
    "claimed for catch-up by another node, which did not run it within the task lock's "
    "TTL (it stopped or stalled); its claim keeps any other node from running it"
)
_MICROSECOND = timedelta(microseconds=1)


@dataclass
class CatchUpReport:
    """What catching up one task did on this node."""

    target: str
    plan: CatchUpPlan | None = None
    results: list[FireResult] = field(default_factory=list)
    #: Fires claimed here and not run (a stop came first); recorded as skipped.
    not_run: int = 0


async def catch_up(
    descriptors: Sequence[ScheduledDescriptor],
    runtime: AsyncTaskRuntime,
    *,
    until: datetime | None = None,
) -> list[CatchUpReport]:
    """Catch up each task of `descriptors` with `catchup=`, one after the other.

    `until` (default: now, by the runtime's clock) is the end of each window. Never
    raises for one task's failure: it is logged and the next task goes on.
    """
    reports: list[CatchUpReport] = []
    for descriptor in descriptors:
        if descriptor.catchup is None:
            continue
        if not runtime.accepting:
            break
        report = CatchUpReport(descriptor.target)
        reports.append(report)
        try:
            await _catch_up_task(descriptor, runtime, until or runtime.wall_now(), report)
        except Exception:  # one task's failure (the history, the backend) stops only it
            logger.exception("%s: catch-up failed", descriptor.target)
    return reports


async def _catch_up_task(
    descriptor: ScheduledDescriptor,
    runtime: AsyncTaskRuntime,
    until: datetime,
    report: CatchUpReport,
) -> None:
    runner = runtime.fire_runner.get()
    history, lock = runner.history, descriptor.lock_name
    if history is None or lock is None:  # refused at boot; a caller of its own
        raise ConfigurationError(f"{descriptor.target}: catchup= needs a run history")
    recorded = await off_loop(
        history.recorded_instants,
        descriptor.target,
        lock=lock,
        after=window_start(descriptor, until),
        until=until,
    )
    plan = report.plan = plan_catch_up(descriptor, until, recorded)
    runtime.telemetry.missed(descriptor.target, plan.missed)
    if not plan.missed:
        return
    logger.info(
        "%s: %d missed fire(s) in its catch-up window: running %d, oldest first%s",
        descriptor.target,
        plan.missed,
        len(plan.run),
        f"; {len(plan.skipped)} beyond catchup_limit recorded as skipped" if plan.skipped else "",
    )
    if plan.skipped:
        skipped = [Fire.at(descriptor, at, TriggerKind.CATCH_UP) for at in plan.skipped]
        await runner.record_passed_over(skipped, plan.skip_reason)
    for start in range(0, len(plan.run), CLAIM_BATCH):
        batch = [
            Fire.at(descriptor, at, TriggerKind.CATCH_UP)
            for at in plan.run[start : start + CLAIM_BATCH]
        ]
        if not runtime.accepting:
            return
        claims = await runner.claim_fires(batch, task_locks=False)
        won = [fire for fire, claim in zip(batch, claims, strict=True) if claim.verdict is WON]
        for index, fire in enumerate(won):
            if not await _run_won(fire, ClaimOutcome(WON, claims[0].seconds), runtime, report):
                # Stopping: the fires claimed here are nobody's now.
                report.not_run = len(won) - index
                await runner.record_passed_over(won[index:], NOT_RUN_REASON)
                return
        theirs = [
            fire
            for fire, claim in zip(batch, claims, strict=True)
            if claim.verdict is Verdict.CLAIMED_ELSEWHERE
        ]
        if theirs:
            unrun = await _wait_for_their_records(theirs, runtime, history, lock)
            if unrun:
                logger.warning(
                    "%s: %d missed fire(s) claimed by another node show no run after %gs "
                    "without progress: recorded as skipped",
                    descriptor.target,
                    len(unrun),
                    descriptor.lock_ttl or 0.0,
                )
                await runner.record_passed_over(unrun, CLAIMED_NOT_RUN_REASON)


async def _wait_for_their_records(
    theirs: list[Fire], runtime: AsyncTaskRuntime, history: RunHistory, lock: str
) -> list[Fire]:
    """Wait while another node runs `theirs` (missed fires it claimed); the ones still
    without a record once no new one came for the task lock's TTL.

    Two nodes that start together claim the same oldest fires: the one that wins a
    batch runs it, the other waits for its records before it claims the next batch,
    so the fires run oldest first across the fleet. A node that died holding the
    claims shows no progress: its fires are then recorded as skipped (its claims
    keep every other node from running them), and the catch-up goes on.
    """
    pending = {fire.instant for fire in theirs}
    first, last = min(pending), max(pending)
    stall = theirs[0].task.lock_ttl or 0.0
    progress = time.monotonic()
    pause = FIRST_PAUSE_SECONDS
    while pending and runtime.accepting:
        await asyncio.sleep(pause)
        recorded = await off_loop(
            history.recorded_instants,
            theirs[0].target,
            lock=lock,
            after=first - _MICROSECOND,
            until=last,
        )
        if pending & recorded:
            pending -= recorded
            progress, pause = time.monotonic(), FIRST_PAUSE_SECONDS
        elif time.monotonic() - progress > stall:
            break
        else:
            pause = min(pause * 2, LAST_PAUSE_SECONDS)
    return [fire for fire in theirs if fire.instant in pending] if runtime.accepting else []


async def _run_won(
    fire: Fire, claim: ClaimOutcome, runtime: AsyncTaskRuntime, report: CatchUpReport
) -> bool:
    """Run `fire`, claimed here; False (not run) when the host is stopping.

    Its task lock may be held: by this task's live fire, or by another node's catch-up
    run of a neighbouring missed fire (two nodes started together). The fire is
    this node's to run, so it is tried again, backing off, until its window ends;
    each try held off is recorded as overlapping, and the run replaces that record.
    """
    window_end = fire.instant + timedelta(seconds=fire.task.catchup or 0.0)
    deadline = time.monotonic() + (window_end - runtime.wall_now()).total_seconds()
    pause = FIRST_PAUSE_SECONDS
    while True:
        ticket = runtime.admit(fire)
        if ticket is None:
            return False
        result = await execute_fire(fire, runtime, preclaimed=PreclaimedFire(fire, claim, ticket))
        if result.verdict is not Verdict.OVERLAPPING or time.monotonic() >= deadline:
            report.results.append(result)
            return True
        await asyncio.sleep(pause)
        pause = min(pause * 2, LAST_PAUSE_SECONDS)
