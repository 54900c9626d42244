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
Which died runs a fire adopts, once its task lock is held, is `fires.adoption`'s.
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
from firefly_scheduling.fires.lock_holders import LockHolders
from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, FireResult, TaskLockAhead, Verdict
from firefly_scheduling.fires.policy import BeforeClaim, FirePolicy, LockHeld, Skip
from firefly_scheduling.fires.recording_async import AsyncRunRecorder
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
class Taken:
    """A fire that is this node's, as the decide stage hands it on.

    `holding` is its task lock's (None: the task is unlocked, and runs on every
    node); `claim_seconds` its claim's round trip (None: no claim); `started_ahead`:
    its run was started in the history with its claim (`claim_many`).
    """

    holding: Holding | None
    claim_seconds: float | None = None
    started_ahead: bool = False


#: An unlocked task's fire, within grace.
UNLOCKED = Taken(None)


class AsyncFireDecider:
    """Decides, for one runner, whether this node runs a fire; thread-safe.

    `holdings` and `claims` are the runner's lock seen through the holding and the
    claiming ports; `capabilities` what it declares. Skips are written through
    `record`; results carry `node`.
    """

    def __init__(
        self,
        holdings: AsyncHoldingLock,
        claims: AsyncClaimingLock,
        capabilities: LockCapabilities,
        *,
        record: AsyncRunRecorder,
        policy: FirePolicy,
        clock: Callable[[], datetime],
        grace: float,
        clock_skew: float,
        node: str,
    ) -> None:
        self._holdings = holdings
        self._claims = claims
        self._batch_claims = claims if isinstance(claims, AsyncBatchClaimingLock) else None
        self._capabilities = capabilities
        self._batch_acquires: AsyncBatchAcquiringLock | None = None
        if capabilities.batch_acquires and isinstance(holdings, AsyncBatchAcquiringLock):
            self._batch_acquires = holdings
        self._record = record
        self._policy = policy
        self._clock = clock
        self._grace = grace
        self._clock_skew = clock_skew
        self._node = node
        self._lock_holders = LockHolders()

    async def take(self, fire: Fire, claim: ClaimOutcome | None = None) -> Taken | FireResult:
        """Whether `fire` is this node's: `Taken`, with its task lock held, or the result
        of a fire this node does not run (every skip it implies recorded).

        `claim` is the fire's claim when `claim_many` took it already: its checks are
        done, but for grace, checked once more (the fire may have waited for a worker).
        """
        if fire.task.lock_name is None:  # an unlocked task runs on every node
            skip = await self._before_claim(fire)
            return UNLOCKED if skip is None else FireResult(fire, self._node, skip.verdict)
        if claim is None:
            skip = await self._before_claim(fire)
            if skip is not None:
                return FireResult(fire, self._node, skip.verdict)
            if fire.task.fixed_delay is not None:  # its instant is this node's: no claim
                return await self._take_task_lock(fire, None, None)
            claim = await self._claim(fire)
        elif claim.verdict is Verdict.SUCCEEDED and await self._waited_past_grace(fire, claim):
            return FireResult(fire, self._node, Verdict.TOO_LATE, claim_seconds=claim.seconds)
        if claim.verdict is not Verdict.SUCCEEDED:
            return FireResult(
                fire, self._node, claim.verdict, error=claim.error, claim_seconds=claim.seconds
            )
        return await self._take_task_lock(fire, claim.task_lock, claim.seconds)

    async def _take_task_lock(
        self, fire: Fire, ahead: TaskLockAhead | None, claim_seconds: float | None
    ) -> Taken | FireResult:
        """The task lock of a fire that is this node's: taken (or the one taken `ahead`
        with its claim), or the result of a fire skipped for it (recorded)."""
        holding = ahead.answer if ahead is not None else await self._acquire(fire)
        if isinstance(holding, LockBackendError):
            logger.warning(
                "%s: fire %s skipped: the task lock failed: %s", fire.target, _at(fire), holding
            )
            await self._record.skip(fire, f"the lock backend failed: {holding}")
            return FireResult(
                fire,
                self._node,
                Verdict.BACKEND_ERROR,
                error=str(holding),
                claim_seconds=claim_seconds,
            )
        if holding is None:
            lock_name = fire.task.lock_name or ""
            why = self._lock_holders.why_held(lock_name, fire.target)
            skip = self._policy.when_held(fire, LockHeld(lock_name, why))
            logger.info("%s: fire %s skipped: %s", fire.target, _at(fire), skip.reason)
            await self._record.skip(fire, skip.reason)
            return FireResult(fire, self._node, skip.verdict, claim_seconds=claim_seconds)
        self._lock_holders.note(holding.name, fire.target)
        return Taken(holding, claim_seconds, ahead is not None and ahead.started)

    def lets_go(self, fire: Fire) -> None:
        """`fire`'s task is about to release its task lock (taken by `take`)."""
        self._lock_holders.forget(fire.task.lock_name or "", fire.target)

    # -- before the claim ---------------------------------------------------------------

    async def _before_claim(self, fire: Fire, *, patience: float | None = None) -> Skip | None:
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

    async def _waited_past_grace(self, fire: Fire, claim: ClaimOutcome) -> bool:
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
        ahead = claim.task_lock
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

    async def _claim(self, fire: Fire) -> ClaimOutcome:
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
        skips = [await self._before_claim(fire, patience=0.0) for fire in batch]
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

    async def _acquire(self, fire: Fire) -> Holding | LockBackendError | None:
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


def lock_ttl(fire: Fire) -> float:
    """The lease of `fire`'s task lock, in seconds."""
    ttl = fire.task.lock_ttl
    return ttl if ttl is not None else DEFAULT_LOCK_TTL_SECONDS


def _at(fire: Fire) -> str:
    return fire.instant.isoformat()
