# async-to-sync: rename AsyncTaskRuntime TaskRuntime
# async-to-sync: rename firefly_scheduling.hosts.runtime.asyncio_runtime firefly_scheduling.hosts.runtime.task_runtime  # noqa: E501
"""The retry sweep: every node learns of the fleet's pending retries from the run history.

The node that ran a failed fire adds its retry's job itself (`retries`). Were that the
only node to know, a retry would die with it. So each APScheduler host with tasks
that have `retries=` reads the history's recent failures every `SWEEP_SECONDS`
(`RunHistory.failures_since`, one query for all its tasks) and adds the job of each
retry they ask for (`retry_policy.pending_retry`: the retry number and due time follow
from the record alone, the same on every node). Every node then wakes at the retry's
due time, and the retry's claim and its conditional start on the record let one of
them run it, as with any fire: a node that died before its retry loses nothing, as
long as another node of the fleet runs, with a history.

A job added for a retry another node runs meanwhile finds its claim taken, or the
record moved on, and runs nothing. Each node adds each retry's job once. `fixed_delay`
tasks are left out (their fires are each node's own, unclaimed), and so is a host
without a run history (nothing to read: its retries live on the node that failed).

Written once, for asyncio, in `hosts/apscheduler/retry_sweep_async.py`; the
synchronous flavour in `hosts/apscheduler/retry_sweep.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import asyncio  # sync: drop
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from firefly_scheduling.fires.outcome import Fire, TriggerKind
from firefly_scheduling.fires.retry_policy import pending_retry
from firefly_scheduling.history.port import HistoryError
from firefly_scheduling.hosts.apscheduler.retries_async import RetryJob
from firefly_scheduling.hosts.runtime.asyncio_runtime import AsyncTaskRuntime
from firefly_scheduling.settings import DEFAULT_GRACE_SECONDS
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.retry_arguments import retry_settings

logger = logging.getLogger("firefly_scheduling.hosts")

#: How often a host reads the history's recent failures.
SWEEP_SECONDS = 5.0
SWEEP_JOB_ID = "firefly-scheduling-retry-sweep"


class RetrySweep:
    """The sweep job of one host: its tasks with retries, and the retries it added."""

    def __init__(
        self,
        scheduler: Any,
        descriptors: Sequence[ScheduledDescriptor],
        runtime: AsyncTaskRuntime,
    ) -> None:
        self.scheduler = scheduler
        self.runtime = runtime
        self.tasks = {
            (task.lock_name, task.target): task
            for task in descriptors
            if task.retries and task.lock_name is not None and task.fixed_delay is None
        }
        longest = max(
            (
                settings.backoff_max
                for task in self.tasks.values()
                if (settings := retry_settings(task))
            ),
            default=0.0,
        )
        #: How far back a failure may have ended and still have a retry to run.
        self.horizon = timedelta(seconds=longest + DEFAULT_GRACE_SECONDS + SWEEP_SECONDS)
        #: The retry jobs this sweep added, by id, with their due times (pruned).
        self._added: dict[str, datetime] = {}

    def attach(self) -> None:
        """Add the sweep as an interval job, when any task can be retried."""
        if not self.tasks:
            return
        # Imported here, as `jobs.FixedDelayFire.schedule` does: the package root
        # must stay light.
        from apscheduler.triggers.interval import IntervalTrigger  # noqa: PLC0415 - see above

        self.scheduler.add_job(
            self.__call__,  # sync: self,
            IntervalTrigger(seconds=SWEEP_SECONDS),
            id=SWEEP_JOB_ID,
            name="firefly retry sweep",
            replace_existing=True,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )

    async def __call__(self) -> None:
        if not self.runtime.accepting:
            return
        try:
            history = self.runtime.fire_runner.get().history
        except Exception:  # the lock could not be built: the fires say why
            logger.exception("the retry sweep has no fire runner")
            return
        if history is None:
            return
        now = self.runtime.wall_now()
        try:
            failures = await asyncio.to_thread(  # sync: failures = history.failures_since(
                history.failures_since,  # sync: drop
                now - self.horizon,
            )
        except HistoryError as err:
            logger.warning("the retry sweep could not read the recent failures: %s", err)
            return
        self._added = {id_: due for id_, due in self._added.items() if due > now - self.horizon}
        for record in failures:
            task = self.tasks.get((record.lock, record.task))
            retry = None if task is None else pending_retry(task, record)
            if task is None or retry is None:
                continue
            job = RetryJob(
                self.scheduler, Fire(task, record.instant, TriggerKind.RETRY, retry), self.runtime
            )
            if job.job_id in self._added or self.scheduler.get_job(job.job_id) is not None:
                continue
            self._added[job.job_id] = retry.due
            job.schedule()
