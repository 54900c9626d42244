# async-to-sync: rename AsyncTaskRuntime TaskRuntime
# async-to-sync: rename firefly_scheduling.hosts.runtime.asyncio_runtime firefly_scheduling.hosts.runtime.task_runtime  # noqa: E501
"""`execute_fire`: the single path from "a trigger fired" to the fire runner.

Every host (resident, cron-driven, library, asyncio) turns a trigger into a `Fire`
(`hosts.observation.observers`) and hands it here. This is the one seam where per-fire concerns
meet: the initial-delay gate, then the fire runner (claims, the task lock,
keep-alive, fencing, adoption, run history), then the observers.

Written once, for asyncio, in `hosts/runtime/execute_async.py`; the synchronous flavour in
`hosts/runtime/execute.py` is generated from it by `tools/async_to_sync.py`. A task body may
be a plain function or a coroutine function on either flavour (`hosts.runtime.task_calls`):
the verdict is taken only once the body has really run.
"""

from __future__ import annotations

import asyncio  # sync: drop
import logging

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.errors import FireflySchedulingError
from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, FireResult, Verdict
from firefly_scheduling.hosts.observation.observers import PreclaimedFire
from firefly_scheduling.hosts.runtime import task_calls
from firefly_scheduling.hosts.runtime.asyncio_runtime import AsyncTaskRuntime

logger = logging.getLogger("firefly_scheduling.hosts")


async def execute_fire(
    fire: Fire, runtime: AsyncTaskRuntime, *, preclaimed: PreclaimedFire | None = None
) -> FireResult:
    """Run `fire` through the gate and the fire runner; never raises for a task's failure.

    Observers hear about every adopted run first, then about the fire itself. The
    whole fire (claim, task lock, body) runs inside its telemetry span, except a claim
    the host took ahead (`preclaimed`, admitted as in flight already): its time is
    still the result's `claim_seconds`.
    """
    admitted = preclaimed.admission if preclaimed is not None else None
    with (
        runtime.tracking(fire, admitted=admitted) as accepted,
        runtime.telemetry.fire(fire, runtime.node) as ended,
    ):
        if not accepted:
            result = FireResult(fire, runtime.node, Verdict.SHUTTING_DOWN)
        else:
            claim = preclaimed.claim if preclaimed is not None else None
            result = await _run(fire, runtime, claim)
        ended(result)
    for finished in (*result.adopted, result):
        for observer in runtime.observers:
            try:
                observer.fire_finished(finished)
            except Exception:  # an observer must never break the host
                logger.exception("fire observer %r failed", observer)
    return result


async def _run(fire: Fire, runtime: AsyncTaskRuntime, claim: ClaimOutcome | None) -> FireResult:
    descriptor = fire.task
    try:
        # The gate (and its store) is only built for a task that has a delay.
        admitted = descriptor.initial_delay is None
        if not admitted:
            if ASYNC:  # the anchor store's I/O is blocking: off the loop
                admitted = await asyncio.to_thread(runtime.gate.get().admit, descriptor)
            else:
                admitted = runtime.gate.get().admit(descriptor)
        runner = runtime.fire_runner.get()  # builds the lock: a broken provider is UNAVAILABLE
    except FireflySchedulingError as err:
        logger.error("%s: fire of %s skipped: %s", fire.target, fire.instant.isoformat(), err)
        return FireResult(fire, runtime.node, Verdict.UNAVAILABLE)
    if not admitted:
        return FireResult(fire, runtime.node, Verdict.HELD_BACK)

    async def body() -> None:
        # Resolved inside the runner: an import error is logged as this task's failure.
        task = runtime.callables.resolve(descriptor.target)
        # Awaited on this loop, or, in the sync flavour, on the host's task loop.
        await task_calls.acall_task(task)  # sync: task_calls.call_task(task, runtime.loop)

    # The runner calls the body once for each died run it adopts, then for this fire;
    # its result carries each run's own (adopted) result, timings included.
    return await runner.run(fire, body, claim=claim)
