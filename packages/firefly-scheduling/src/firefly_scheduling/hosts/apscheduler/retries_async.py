# async-to-sync: rename AsyncTaskRuntime TaskRuntime
# async-to-sync: rename firefly_scheduling.hosts.runtime.asyncio_runtime firefly_scheduling.hosts.runtime.task_runtime  # noqa: E501
"""Retries on the APScheduler hosts (resident, library, asyncio): a one-shot job each.

A fire whose run failed comes back from the runner with the retry its task's
`retries=` asks for (`FireResult.retry`, `fires.retries`). The job that ran it adds a
one-shot job here, woken at the retry's due time, that runs the retry through
`execute_fire` like any fire: its grace, its own claim, the task lock, the history.
A retry that fails again adds the next one the same way, until the policy answers
that none is due.

The job lives in this process's memory; the other nodes learn of the retry from the
run history (`retry_sweep`) and add the same job, so a node that stops (or dies)
before the retry is due does not take it along (docs/policies.md, Retries, under
faults). A host that shuts down adds no retry.

Written once, for asyncio, in `hosts/apscheduler/retries_async.py`; the synchronous
flavour in `hosts/apscheduler/retries.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import logging
from typing import Any

from firefly_scheduling.fires.outcome import Fire, FireResult
from firefly_scheduling.hosts.runtime.asyncio_runtime import AsyncTaskRuntime
from firefly_scheduling.hosts.runtime.execute_async import execute_fire

logger = logging.getLogger("firefly_scheduling.hosts")

#: A retry's job id starts with it; the rest names the task, the fire and the retry.
RETRY_JOB_PREFIX = "firefly-scheduling-retry:"
#: As a recurring job's (`jobs.JOB_OPTIONS`): APScheduler never drops a late run.
_RETRY_JOB_OPTIONS: dict[str, Any] = {"max_instances": 1, "misfire_grace_time": None}


class RetryJob:
    """The one-shot job of one retry: it runs the retry, then adds the next if due."""

    def __init__(self, scheduler: Any, fire: Fire, runtime: AsyncTaskRuntime) -> None:
        if fire.retry is None:
            raise ValueError(f"{fire.target}: fire {fire.instant.isoformat()} is no retry")
        self.scheduler = scheduler
        self.fire = fire
        self.runtime = runtime

    @property
    def job_id(self) -> str:
        retry = self.fire.retry
        number = 0 if retry is None else retry.number
        return f"{RETRY_JOB_PREFIX}{self.fire.target}@{self.fire.instant.isoformat()}#{number}"

    def schedule(self) -> None:
        """Add the job, woken at the retry's due time."""
        # Imported here, as `jobs.FixedDelayFire.schedule` does: the package root
        # must stay light.
        from apscheduler.triggers.date import DateTrigger  # noqa: PLC0415 - see above

        self.scheduler.add_job(
            self.__call__,  # sync: self,
            DateTrigger(run_date=self.fire.due),
            id=self.job_id,
            name=f"{self.fire.target} ({self.fire.retry})",
            replace_existing=True,
            **_RETRY_JOB_OPTIONS,
        )

    async def __call__(self) -> None:
        result = await execute_fire(self.fire, self.runtime)
        schedule_retry(self.scheduler, result, self.runtime)

    def __repr__(self) -> str:
        return f"{self.fire.target} ({self.fire.retry})"


def schedule_retry(scheduler: Any, result: FireResult, runtime: AsyncTaskRuntime) -> None:
    """Add the job of the retry `result` asks for, if any, unless the host shuts down."""
    retry = result.retry
    if retry is None:
        return
    if not runtime.accepting:
        logger.warning(
            "%s: fire %s: %s not scheduled: the host is shutting down",
            retry.target,
            retry.instant.isoformat(),
            retry.retry,
        )
        return
    RetryJob(scheduler, retry, runtime).schedule()
