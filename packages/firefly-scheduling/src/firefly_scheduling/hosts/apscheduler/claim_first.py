"""`ClaimFirstExecutor`: the resident host claims the fires of an instant together.

Every node of a fleet attempts every fire of a locked task, and on N nodes N - 1 of
them lose its claim. Handed to a worker thread first, a lost fire cost a thread
wake-up, APScheduler's run wrapper and a round trip of its own, fought for under the
GIL by up to 64 threads: most of a node's CPU with 200 one-second tasks
(`benchmarks/fire_cost.py`). This executor sits where APScheduler hands a
due job to its thread pool:

* a job of a locked recurring task (`RecurringFire.claimable_ahead`) goes to one
  claimer thread instead;
* the claimer takes every job waiting (those APScheduler submitted while the
  previous batch was on the wire: group commit, so no timer and no added wait),
  admits each fire as in flight (`RuntimeBase.admit`: a shutdown waits for a claim
  won), names its instant, and claims them all with one `FireRunner.claim_fires`,
  which is one round trip on a backend that takes batches;
* a won fire goes to the thread pool, its job handed the claim (`RecurringFire.hand`);
  a lost, too-late or failed one runs its job at once in the claimer thread, where
  it costs no round trip: the job still reports it to the observers and records the
  instants it passed over, as before.

Unlocked, `fixed_delay` and initial-delay tasks go to the pool as before. A won
claim always reaches its job: after the pool has shut down, the claimer runs it.
"""

from __future__ import annotations

import logging
import queue
import threading
from datetime import datetime
from typing import Any

from apscheduler.executors.base import run_job
from apscheduler.executors.pool import ThreadPoolExecutor

from firefly_scheduling.errors import FireflySchedulingError
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.hosts.apscheduler.jobs import RecurringFire
from firefly_scheduling.hosts.observation.observers import PreclaimedFire
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime

logger = logging.getLogger("firefly_scheduling.hosts")

#: A job APScheduler submitted, and the run times it passed with it.
_Submitted = tuple[Any, list[datetime]]


class ClaimFirstExecutor(ThreadPoolExecutor):  # type: ignore[misc]  # APScheduler is untyped
    """APScheduler's thread-pool executor, with the fire claims taken ahead in batches."""

    def __init__(self, max_workers: int, runtime: TaskRuntime) -> None:
        super().__init__(max_workers)
        self._runtime = runtime
        self._waiting: queue.SimpleQueue[_Submitted | None] = queue.SimpleQueue()
        self._claimer: threading.Thread | None = None

    def start(self, scheduler: Any, alias: str) -> None:
        super().start(scheduler, alias)
        if self._claimer is None:
            self._claimer = threading.Thread(
                target=self._claim_loop, name="firefly-claimer", daemon=True
            )
            self._claimer.start()

    def shutdown(self, wait: bool = True) -> None:
        self._waiting.put(None)
        if wait and self._claimer is not None:
            self._claimer.join()
        super().shutdown(wait)

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        # Called by APScheduler under the executor's lock: only queue here.
        fire = job.func
        if isinstance(fire, RecurringFire) and fire.claimable_ahead:
            self._waiting.put((job, run_times))
        else:
            super()._do_submit_job(job, run_times)

    def _claim_loop(self) -> None:
        stopping = False
        while not stopping:
            batch = [self._waiting.get()]
            while True:
                try:
                    batch.append(self._waiting.get_nowait())
                except queue.Empty:
                    break
            stopping = None in batch
            submitted = [entry for entry in batch if entry is not None]
            if submitted:
                self._claim_and_dispatch(submitted)

    def _claim_and_dispatch(self, submitted: list[_Submitted]) -> None:
        runtime = self._runtime
        try:
            runner = runtime.fire_runner.get()
        except FireflySchedulingError:  # the lock cannot be built: each job's run says why
            for job, run_times in submitted:
                self._to_pool(job, run_times)
            return
        admitted: list[tuple[_Submitted, RecurringFire, Fire, int]] = []
        for job, run_times in submitted:
            recurring: RecurringFire = job.func
            try:
                fire = recurring.fire_at(recurring.due_instant())
            except Exception:  # a trigger's defect: the job, run as before, reports it
                logger.exception("%s: its due fire could not be named", recurring.descriptor.target)
                self._to_pool(job, run_times)
                continue
            ticket = runtime.admit(fire)
            if ticket is None:  # shutting down: the job says so, and claims nothing
                self._run_here(job, run_times)
                continue
            admitted.append(((job, run_times), recurring, fire, ticket))
        if not admitted:
            return
        try:
            outcomes = runner.claim_fires([fire for _, _, fire, _ in admitted])
        except Exception:  # a defect, not a backend error (those are answers): logged, and
            # each job claims its own fire instead, so no job is left counted as running
            logger.exception("the fire claimer failed on a batch of %d", len(admitted))
            for (job, run_times), _, _, ticket in admitted:
                runtime.finish(ticket)
                self._to_pool(job, run_times)
            return
        not_won: list[_Submitted] = []
        for ((job, run_times), recurring, fire, ticket), outcome in zip(
            admitted, outcomes, strict=True
        ):
            recurring.hand(PreclaimedFire(fire, outcome, ticket))
            if outcome.verdict is Verdict.SUCCEEDED:
                self._to_pool(job, run_times)
            else:
                not_won.append((job, run_times))
        # The fires won are on their way first: a lost one's job may still write (its
        # first run reads the task's newest record, a passed-over fire is recorded).
        for job, run_times in not_won:
            self._run_here(job, run_times)

    def _to_pool(self, job: Any, run_times: list[datetime]) -> None:
        try:
            super()._do_submit_job(job, run_times)
        except RuntimeError:  # the pool has shut down: a claim won must still run
            self._run_here(job, run_times)

    def _run_here(self, job: Any, run_times: list[datetime]) -> None:
        """What a pool worker does with a job, in this thread."""
        try:
            events = run_job(job, job._jobstore_alias, run_times, self._logger.name)
        except Exception as exc:  # noqa: BLE001 - reported as the pool's callback does
            self._run_job_error(job.id, exc, exc.__traceback__)
        else:
            self._run_job_success(job.id, events)
