# Generated from deciding_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`FireDecider`: the decide stage of a fire: may it still run, and on the policy's word.

Written once, for asyncio, in `fires/deciding_async.py`; `fires/deciding.py` is
generated from it by `tools/async_to_sync.py`.

The first stage a fire meets (`FireRunner.run`); it takes the `Fire` the host made
and leaves it as it is:

* **Jitter.** A fire is late from its `due` time (its instant, plus its jitter
  offset for a task with `jitter=`). A host wakes a jittered fire at `due`; one
  handed over earlier (a host's clock a little ahead, a caller of its own) waits
  here until `due`, at most the task's jitter, so it never starts before it.
* **Grace.** A fire more than `grace` seconds late by this node's clock is skipped
  and the skip recorded: no catch-up flood after a stall. A catch-up fire is
  measured against its task's `catchup=` window instead (`fires.catching_up`).
* **The policy, before the claim** (`FirePolicy.before_claim`), with how late it is.

A fire let through goes on to the claim stage (`fires.claims`), which hands a fire
it won to the lock stage (`fires.locking`): each stage hands the fire on, and none
hands it back. A fire claimed ahead with a batch (`claim_many`: the claims, then the
task locks of the fires won, then their starts, each one request where the backend
and the history can) is checked for grace once more here, since it may have waited
for a worker. Skips go to the record stage (`fires.recording`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, FireResult, Verdict
from firefly_scheduling.fires.policy import BeforeClaim, FirePolicy, Skip
from firefly_scheduling.history.port import RunState
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import HoldingLock
from firefly_scheduling.schedule.durations import readable_duration

if TYPE_CHECKING:
    from firefly_scheduling.fires.claims import FireClaimer
    from firefly_scheduling.fires.locking import TaskLocker
    from firefly_scheduling.fires.recording import RunRecorder
    from firefly_scheduling.fires.running import Body
    from firefly_scheduling.fires.starting import RunStarter

logger = logging.getLogger("firefly_scheduling.fires")

#: Why a fire started with its claim is closed as expired when no worker took it in time.
TOO_LATE_FOR_A_WORKER = "it waited past grace for a worker after its claim, and never ran"


class FireDecider:
    """The decide stage of one runner; thread-safe.

    A fire let through goes on to `claimer`; `claim_many` also asks `locker` for the
    task locks of a batch's won fires. `holdings` gives back a lock taken ahead for
    a fire that waited past grace. Skips are written through `record`; results carry
    `node`.
    """

    def __init__(
        self,
        claimer: FireClaimer,
        locker: TaskLocker,
        starter: RunStarter,
        holdings: HoldingLock,
        *,
        record: RunRecorder,
        policy: FirePolicy,
        clock: Callable[[], datetime],
        grace: float,
        node: str,
    ) -> None:
        self._claimer = claimer
        self._locker = locker
        self._starter = starter
        self._holdings = holdings
        self._record = record
        self._policy = policy
        self._clock = clock
        self._grace = grace
        self._node = node

    def take(self, fire: Fire, body: Body, claim: ClaimOutcome | None = None) -> FireResult:
        """Decide `fire`, and hand it on to the claim stage if it may still run.

        `claim` is the fire's claim when `claim_many` took it already: its checks are
        done, but for grace, checked once more (the fire may have waited for a worker).
        """
        if claim is None:
            skip = self._before_claim(fire)
            if skip is not None:
                return FireResult(fire, self._node, skip.verdict)
        elif claim.verdict is Verdict.SUCCEEDED and self._waited_past_grace(fire, claim):
            return FireResult(fire, self._node, Verdict.TOO_LATE, claim_seconds=claim.seconds)
        return self._claimer.claim_then_run(fire, body, claim)

    def claim_many(self, batch: Sequence[Fire], *, task_locks: bool = True) -> list[ClaimOutcome]:
        """Claim the fires of locked recurring tasks together (`FireRunner.claim_fires`).

        The checks and records are `before_claim`'s, each skip record tried once (the
        batch's other fires wait for these writes; a failed one is remembered). Where
        the backend batches acquisitions, the task locks of the fires won are taken
        as one more request, and where the history starts runs in batches, their runs
        are started with them (`TaskLockAhead`). `task_locks=False` takes the claims
        alone: the fires of one task caught up in a batch share a task lock, which
        each run takes in turn.
        """
        started = time.perf_counter()
        for fire in batch:
            if fire.task.lock_name is None or fire.task.fixed_delay is not None:
                raise ValueError(f"{fire.target}: only a locked recurring fire is claimed")
        skips = [self._before_claim(fire, patience=0.0) for fire in batch]
        pending = [fire for fire, skip in zip(batch, skips, strict=True) if skip is None]
        claimed = iter(self._claimer.claim_all(pending, patience=0.0))
        answers = [(skip.verdict, None) if skip else next(claimed) for skip in skips]
        ahead = {}
        if task_locks:
            ahead = self._locker.take_ahead(batch, [verdict for verdict, _ in answers])
        if ahead:
            ahead = self._starter.starts_ahead(batch, ahead)
        took = time.perf_counter() - started
        return [
            ClaimOutcome(verdict, took, ahead.get(index), error=error)
            for index, (verdict, error) in enumerate(answers)
        ]

    def _before_claim(self, fire: Fire, *, patience: float | None = None) -> Skip | None:
        """Why `fire` is not claimed (too late, or the policy's skip), recorded; else None.

        `patience` bounds the skip record's retries (see `claim_many`).
        """
        late = (self._clock() - fire.due).total_seconds()
        jitter = fire.task.jitter
        if late < 0 and jitter is not None:  # woken before its offset: wait for it
            time.sleep(min(-late, jitter))
            late = (self._clock() - fire.due).total_seconds()
        if late > self._grace + fire.catchup_window:
            return self._too_late(fire, late, patience)
        decision = self._policy.before_claim(fire, BeforeClaim(late))
        if isinstance(decision, Skip):
            logger.info("%s: fire %s skipped: %s", fire.target, _at(fire), decision.reason)
            self._record.skip(fire, decision.reason, patience=patience)
            return decision
        return None

    def _waited_past_grace(self, fire: Fire, claim: ClaimOutcome) -> bool:
        """Whether `fire`, claimed with a batch, waited past grace for a worker (a
        saturated pool, a stalled process): it is then skipped, recorded, and its task
        lock taken `ahead` given back, its run started ahead closed as expired.

        A fire starts only within grace, as one claimed on its own does, so inside its
        claim's window.
        """
        late = (self._clock() - fire.due).total_seconds()
        if late <= self._grace + fire.catchup_window:
            return False
        self._too_late(fire, late, None)
        ahead = claim.task_lock
        if ahead is not None and isinstance(ahead.answer, Holding):
            if ahead.started:  # its record says running: it never will
                self._record.close_unrun(
                    fire,
                    token=ahead.answer.fence,
                    state=RunState.EXPIRED,
                    error=TOO_LATE_FOR_A_WORKER,
                )
            self._holdings.release_holding(ahead.answer)
        return True

    def _too_late(self, fire: Fire, late: float, patience: float | None) -> Skip:
        window = fire.catchup_window
        limit = f"the grace of {self._grace:g}s"
        if window:
            limit = f"its catchup window of {readable_duration(window)} and {limit}"
        reason = f"{late:.3f}s late, beyond {limit}"
        logger.warning("%s: fire %s skipped: %s", fire.target, _at(fire), reason)
        self._record.skip(fire, reason, patience=patience)
        return Skip(Verdict.TOO_LATE, reason)


def _at(fire: Fire) -> str:
    return fire.instant.isoformat()
