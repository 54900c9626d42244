# async-to-sync: rename AsyncFireDecider FireDecider
# async-to-sync: rename AsyncRunRecorder RunRecorder
"""`AsyncFireDecider`: the decide stage of a fire: is it this node's, and under which lock.

Written once, for asyncio, in `fires/deciding_async.py`; `fires/deciding.py` is
generated from it by `tools/async_to_sync.py`.

Every decision takes the `Fire` the host made and leaves it as it is. In the order a
fire meets them:

* **Grace.** A fire more than `grace` seconds late by this node's clock is skipped
  and the skip recorded: no catch-up flood after a stall.
* **The policy, before the claim** (`FirePolicy.before_claim`), with how late it is.
* **The claim** (`fires.claims`), alone or for a batch of fires (one request where
  the backend takes batches). Lost: another node has the fire; nothing is recorded.
* **The task lock**, fenced where the backend can, alone, or taken ahead for the won
  fires of a batch where the backend batches acquisitions. Held by another run: the
  policy says how the fire is skipped (`FirePolicy.when_held`), and it is recorded.
* **Adoption.** Holding the task lock proves no other run of the task is alive, so a
  `running` record in the history is a died (or stalled) run: the newest within
  grace is adopted, older ones are closed as expired.

Skips go to the record stage (`fires.recording`); nothing here runs a body.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.fires.claims import claim_name, claim_seconds
from firefly_scheduling.fires.history_calls_async import off_loop
from firefly_scheduling.fires.lock_holders import LockHolders
from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, TaskLockAhead, Verdict
from firefly_scheduling.fires.policy import BeforeClaim, FirePolicy, LockHeld, Skip
from firefly_scheduling.fires.recording_async import AsyncRunRecorder
from firefly_scheduling.history.port import HistoryError, RunHistory
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import (
    AsyncBatchAcquiringLock,
    AsyncBatchClaimingLock,
    AsyncClaimingLock,
    AsyncHoldingLock,
    LockCapabilities,
)
from firefly_scheduling.tasks.descriptor import DEFAULT_LOCK_TTL_SECONDS

logger = logging.getLogger("firefly_scheduling.fires")

#: Why a fire started with its claim is closed as expired when no worker took it in time.
TOO_LATE_FOR_A_WORKER = "it waited past grace for a worker after its claim, and never ran"


@dataclass(frozen=True, slots=True)
class DiedRun:
    """A run found `running` in the history while this node holds the task lock: its
    fire (built once, from the record), and the attempt and node the record holds."""

    fire: Fire
    attempt: int
    node: str


@dataclass(frozen=True, slots=True)
class DiedRuns:
    """The died runs of a task: the one to run again here, and those closed as expired."""

    adopt: DiedRun | None = None
    expired: tuple[DiedRun, ...] = ()


NO_DIED_RUNS = DiedRuns()


class AsyncFireDecider:
    """Decides, for one runner, whether this node runs a fire; thread-safe.

    `holdings` and `claims` are the runner's lock seen through the holding and the
    claiming ports; `capabilities` what it declares. Skips are written through
    `record`; `history` is read for died runs.
    """

    def __init__(
        self,
        holdings: AsyncHoldingLock,
        claims: AsyncClaimingLock,
        capabilities: LockCapabilities,
        *,
        record: AsyncRunRecorder,
        history: RunHistory | None,
        policy: FirePolicy,
        clock: Callable[[], datetime],
        grace: float,
        clock_skew: float,
    ) -> None:
        self._holdings = holdings
        self._claims = claims
        self._batch_claims = claims if isinstance(claims, AsyncBatchClaimingLock) else None
        self._capabilities = capabilities
        self._batch_acquires: AsyncBatchAcquiringLock | None = None
        if capabilities.batch_acquires and isinstance(holdings, AsyncBatchAcquiringLock):
            self._batch_acquires = holdings
        self._record = record
        self._history = history
        self._policy = policy
        self._clock = clock
        self._grace = grace
        self._clock_skew = clock_skew
        self._lock_holders = LockHolders()

    # -- before the claim ---------------------------------------------------------------

    async def before_claim(self, fire: Fire, *, patience: float | None = None) -> Skip | None:
        """Why `fire` is not claimed (too late, or the policy's skip), recorded; else None.

        `patience` bounds the skip record's retries (see `claim_many`).
        """
        late = (self._clock() - fire.instant).total_seconds()
        if late > self._grace:
            return await self._too_late(fire, late, patience)
        decision = self._policy.before_claim(fire, BeforeClaim(late))
        if isinstance(decision, Skip):
            logger.info("%s: fire %s skipped: %s", fire.target, _at(fire), decision.reason)
            await self._record.skip(fire, decision.reason, patience=patience)
            return decision
        return None

    async def waited_past_grace(self, fire: Fire, ahead: TaskLockAhead | None) -> bool:
        """Whether `fire`, claimed with a batch, waited past grace for a worker (a
        saturated pool, a stalled process): it is then skipped, recorded, and its task
        lock taken `ahead` given back, its run started ahead closed as expired.

        A fire starts only within grace, as one claimed on its own does, so inside its
        claim's window.
        """
        late = (self._clock() - fire.instant).total_seconds()
        if late <= self._grace:
            return False
        await self._too_late(fire, late, None)
        if ahead is not None and isinstance(ahead.answer, Holding):
            if ahead.started:  # its record says running: it never will
                await self._record.close_unrun(
                    fire,
                    token=ahead.answer.fence,
                    verdict=Verdict.EXPIRED,
                    error=TOO_LATE_FOR_A_WORKER,
                )
            await self._holdings.release_holding(ahead.answer)
        return True

    async def _too_late(self, fire: Fire, late: float, patience: float | None) -> Skip:
        logger.warning(
            "%s: fire %s skipped: %.3fs late, beyond the grace of %gs",
            fire.target,
            _at(fire),
            late,
            self._grace,
        )
        reason = f"{late:.3f}s late, beyond the grace of {self._grace:g}s"
        await self._record.skip(fire, reason, patience=patience)
        return Skip(Verdict.TOO_LATE, reason)

    # -- the claim ----------------------------------------------------------------------

    async def claim(self, fire: Fire) -> ClaimOutcome:
        """Claim `fire` on its own: won (SUCCEEDED), or why not, with its round trip."""
        started = time.perf_counter()
        [(verdict, error)] = await self._claim_all([fire])
        return ClaimOutcome(verdict, time.perf_counter() - started, error=error)

    async def claim_many(self, batch: Sequence[Fire]) -> list[ClaimOutcome]:
        """Claim the fires of locked recurring tasks together (`FireRunner.claim_fires`).

        The checks and records are `before_claim`'s, each skip record tried once (the
        batch's other fires wait for these writes; a failed one is remembered). Where
        the backend batches acquisitions, the task locks of the fires won are taken
        as one more request, and where the history starts runs in batches, their runs
        are started with them (`TaskLockAhead`).
        """
        started = time.perf_counter()
        for fire in batch:
            if fire.task.lock_name is None or fire.task.fixed_delay is not None:
                raise ValueError(f"{fire.target}: only a locked recurring fire is claimed")
        skips = [await self.before_claim(fire, patience=0.0) for fire in batch]
        pending = [fire for fire, skip in zip(batch, skips, strict=True) if skip is None]
        claimed = iter(await self._claim_all(pending, patience=0.0))
        answers = [(skip.verdict, None) if skip else next(claimed) for skip in skips]
        ahead = await self._task_locks_ahead(batch, [verdict for verdict, _ in answers])
        if ahead:
            ahead = await self._record.starts_ahead(batch, ahead)
        took = time.perf_counter() - started
        return [
            ClaimOutcome(verdict, took, ahead.get(index), error=error)
            for index, (verdict, error) in enumerate(answers)
        ]

    async def _claim_all(
        self, fires: Sequence[Fire], *, patience: float | None = None
    ) -> list[tuple[Verdict, str | None]]:
        """Claim each fire: SUCCEEDED when won, else the status, each with the reason a
        fire not claimed gets in its result (None when won or claimed elsewhere)."""
        now = self._clock()
        windows = [
            claim_seconds(fire.instant, now, grace=self._grace, clock_skew=self._clock_skew)
            for fire in fires
        ]
        requests = [
            (claim_name(fire.target, fire.task.lock_name or "", fire.instant), seconds)
            for fire, seconds in zip(fires, windows, strict=True)
            if seconds > 0
        ]
        answers = iter(await self._send_claims(requests))
        verdicts: list[tuple[Verdict, str | None]] = []
        for fire, seconds in zip(fires, windows, strict=True):
            if seconds <= 0:  # grace ran out between the check and now (clock_skew == 0)
                reason = "the grace ran out before it could be claimed"
                await self._record.skip(fire, reason, patience=patience)
                verdicts.append((Verdict.TOO_LATE, reason))
                continue
            answer = next(answers)
            if isinstance(answer, LockBackendError):
                logger.warning(
                    "%s: fire %s skipped: its claim failed: %s", fire.target, _at(fire), answer
                )
                # Harmless if another node runs it: a start replaces a skip.
                reason = f"the lock backend failed: {answer}"
                await self._record.skip(fire, reason, patience=patience)
                verdicts.append((Verdict.BACKEND_ERROR, reason))
            elif not answer:
                if logger.isEnabledFor(logging.DEBUG):  # the common verdict: no isoformat
                    logger.debug("%s: fire %s is claimed elsewhere", fire.target, _at(fire))
                verdicts.append((Verdict.CLAIMED_ELSEWHERE, None))
            else:
                verdicts.append((Verdict.SUCCEEDED, None))
        return verdicts

    async def _send_claims(
        self, requests: Sequence[tuple[str, float]]
    ) -> list[bool | LockBackendError]:
        """Each claim's answer: one batch where the backend takes them, else one by one."""
        if len(requests) > 1 and self._batch_claims is not None:
            return await self._batch_claims.try_claim_many(requests)
        answers: list[bool | LockBackendError] = []
        for name, seconds in requests:
            try:
                answers.append(await self._claims.try_claim(name, seconds))
            except LockBackendError as err:
                answers.append(err)
        return answers

    # -- the task lock ------------------------------------------------------------------

    async def acquire(self, fire: Fire) -> Holding | LockBackendError | None:
        """The task lock of `fire`: the holding, None when held, or the backend's error."""
        try:
            return await self._holdings.acquire(
                fire.task.lock_name or "", lock_ttl(fire), fenced=self._capabilities.fenced
            )
        except LockBackendError as err:
            return err

    async def _task_locks_ahead(
        self, fires: Sequence[Fire], verdicts: Sequence[Verdict]
    ) -> dict[int, TaskLockAhead]:
        """The task locks of the fires won, as one request, on a backend that batches them.

        Each won fire's worker would otherwise send its own acquisition: with 200
        fires a second, a blocking round trip per fire from up to 64 threads costs
        more CPU in thread switches than the request itself. Elsewhere (no
        `batch_acquires`) nothing is taken here: one by one, in this one thread, they
        would delay the fires behind them.
        """
        batch = self._batch_acquires
        won = [index for index, verdict in enumerate(verdicts) if verdict is Verdict.SUCCEEDED]
        if batch is None or not won:
            return {}
        requests = [(fires[index].task.lock_name or "", lock_ttl(fires[index])) for index in won]
        answers = await batch.acquire_many(requests, fenced=self._capabilities.fenced)
        return {index: TaskLockAhead(answer) for index, answer in zip(won, answers, strict=True)}

    async def lock_failed(self, fire: Fire, err: LockBackendError) -> None:
        """The task lock could not be taken for an error: the fire is skipped, recorded."""
        logger.warning("%s: fire %s skipped: the task lock failed: %s", fire.target, _at(fire), err)
        await self._record.skip(fire, f"the lock backend failed: {err}")

    async def lock_held(self, fire: Fire) -> Skip:
        """The task lock is held by another run: skipped as the policy says, recorded."""
        lock_name = fire.task.lock_name or ""
        why = self._lock_holders.why_held(lock_name, fire.target)
        skip = self._policy.when_held(fire, LockHeld(lock_name, why))
        logger.info("%s: fire %s skipped: %s", fire.target, _at(fire), skip.reason)
        await self._record.skip(fire, skip.reason)
        return skip

    def holds(self, fire: Fire) -> None:
        """`fire`'s task holds its lock from now on (`lock_held` names it to the others)."""
        self._lock_holders.note(fire.task.lock_name or "", fire.target)

    def lets_go(self, fire: Fire) -> None:
        """`fire`'s task is about to release its lock."""
        self._lock_holders.forget(fire.task.lock_name or "", fire.target)

    # -- adoption -----------------------------------------------------------------------

    async def died_runs(self, fire: Fire, holding: Holding) -> DiedRuns:
        """The task's died runs, read while holding its lock: the newest within grace to
        adopt, the older ones closed here as expired (each is a fire, made once from its
        record). A fire this node finished but could not record is never adopted: it ran.
        """
        history = self._history
        if history is None:
            return NO_DIED_RUNS
        try:
            unfinished = await off_loop(history.unfinished, fire.target, lock=holding.name)
        except HistoryError as err:
            logger.warning(
                "%s: the run history is unavailable, nothing adopted: %s", fire.target, err
            )
            return NO_DIED_RUNS
        died = [
            DiedRun(Fire.at(fire.task, record.instant), record.attempt, record.node)
            for record in unfinished
            if record.instant != fire.instant
        ]
        died = [run for run in died if not self._record.finished_here(run.fire)]
        if not died:
            return NO_DIED_RUNS
        now = self._clock()
        within = [run for run in died if (now - run.fire.instant).total_seconds() <= self._grace]
        adopt = within[-1] if within else None
        expired = tuple(run for run in died if run is not adopt)
        for run in expired:
            reason = (
                f"attempt {run.attempt} on {run.node} stopped holding the task lock "
                "without finishing, and no node adopted it within grace"
            )
            logger.warning("%s: fire %s expired: %s", fire.target, _at(run.fire), reason)
            await self._record.close_unrun(
                run.fire, token=holding.fence, verdict=Verdict.EXPIRED, error=reason
            )
        return DiedRuns(adopt, expired)


def lock_ttl(fire: Fire) -> float:
    """The lease of `fire`'s task lock, in seconds."""
    ttl = fire.task.lock_ttl
    return ttl if ttl is not None else DEFAULT_LOCK_TTL_SECONDS


def _at(fire: Fire) -> str:
    return fire.instant.isoformat()
