"""`run_guarded`: the plain lock guard, for an application that runs a task itself.

The hosts run every fire through `fires.FireRunner`, which adds per-fire claims,
keep-alive, fencing and history on top of the same rules. `run_guarded` is those
rules alone, for an application that runs a task itself (a management command, a
worker's own loop) and wants "at most one node at a time" without fire identity:

* an unlocked task runs;
* a lost race (`try_acquire` returned False) skips silently (debug log only):
  another node is running this fire;
* a `LockBackendError` from `try_acquire` is logged and the run is skipped: a task
  never runs unlocked because its lock server was down;
* an exception from the body is logged with the task target and swallowed, so one
  failing task never stops the others;
* the lock is released in `finally`, whatever happened.

Resolving a target to a callable is another job, in `firefly_scheduling.tasks.callables`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.fires.outcome import Verdict
from firefly_scheduling.locks.port import DistributedLock
from firefly_scheduling.tasks.descriptor import DEFAULT_LOCK_TTL_SECONDS, ScheduledDescriptor

logger = logging.getLogger("firefly_scheduling.locks.guard")


def run_guarded(
    descriptor: ScheduledDescriptor, body: Callable[[], object], lock: DistributedLock
) -> Verdict:
    """Run `body` for `descriptor` under its lock, following the rules in the module doc.

    The verdict is one of four: `SUCCEEDED`, `FAILED`, `OVERLAPPING` (the lock is held
    elsewhere) or `BACKEND_ERROR`, the words the hosts' `FireResult` uses too.

    Only `Exception`s from the body are swallowed; `KeyboardInterrupt` and
    `SystemExit` still propagate, after the lock is released.
    """
    target = descriptor.target
    if inspect.iscoroutinefunction(body):
        # It would only build a coroutine: "ran" would be reported for a body that never
        # did. The hosts await such tasks (`hosts.runtime.task_calls`); this plain guard cannot.
        raise TypeError(
            f"{target}: run_guarded cannot run an async def body; run it on a host "
            "(firefly-scheduling run/tick, register(), or contrib.starlette)"
        )
    name = descriptor.lock_name
    if name is not None:
        ttl = descriptor.lock_ttl if descriptor.lock_ttl is not None else DEFAULT_LOCK_TTL_SECONDS
        try:
            acquired = lock.try_acquire(name, ttl)
        except LockBackendError as err:
            logger.warning("%s: skipped, the lock %r could not be taken: %s", target, name, err)
            return Verdict.BACKEND_ERROR
        if not acquired:
            logger.debug("%s: skipped, the lock %r is held elsewhere", target, name)
            return Verdict.OVERLAPPING
    try:
        returned = body()
        if inspect.isawaitable(returned):
            if inspect.iscoroutine(returned):
                returned.close()  # never run: no "never awaited" warning on top
            raise TypeError(f"{target}: the body returned an awaitable this guard cannot await")
    except Exception:
        logger.exception("%s: the task raised", target)
        return Verdict.FAILED
    finally:
        if name is not None:
            lock.release(name)
    return Verdict.SUCCEEDED
