# Generated from locking_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The lock stage: a fire's task lock, taken before its run and given back after it.

Written once, for asyncio, in `fires/locking_async.py`; `fires/locking.py` is
generated from it by `tools/async_to_sync.py`.

A fire that is this node's (its claim won, or no claim needed) meets its task lock
here, fenced where the backend can, or the one taken ahead with its claim
(`claim_many`). Held, it is renewed while the locked run (`fires.locked_run`) goes
(`locks.keepalive`, every `lock_ttl / 3` by default), and released here once that
run is over: the task lock is taken, kept and given back in one place. Not held, the
fire ends here, its skip recorded:

* **Held by another run.** The policy says what the fire does (`FirePolicy.when_held`,
  the task's `overlap=`): skipped, run alongside without the lock (`allow_all`), or
  buffered until the lock is free (`buffer_one`, `buffer_all`: `fires.overlap_wait`).
  It is told why the lock is held: the backends keep an owner token, not a task, so
  the holder is known only when it is this process (`LockHolders`: every fire notes
  the task lock it takes). With `lock=True` the holder can only be
  an earlier fire of the task; a lock name shared by several tasks, which then starve
  each other, must say which task holds it.
* **The backend failed.** A `LockBackendError` skips the fire: never a body unlocked.

A session backend may learn only at the release that its session ended while the
body ran: the run is then reported lost, since another node may have held the lock.
An unlocked task's fire takes no lock and goes straight on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.fires.outcome import Fire, FireResult, TaskLockAhead, Verdict
from firefly_scheduling.fires.overlap_wait import OverlapWaiter
from firefly_scheduling.fires.policy import FirePolicy, LockHeld, RunAlongside, Skip
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.keepalive import KeepAlive
from firefly_scheduling.locks.port import (
    BatchAcquiringLock,
    HoldingLock,
    LockCapabilities,
)
from firefly_scheduling.tasks.descriptor import DEFAULT_LOCK_TTL_SECONDS

if TYPE_CHECKING:
    from firefly_scheduling.fires.locked_run import LockedRun
    from firefly_scheduling.fires.recording import RunRecorder
    from firefly_scheduling.fires.running import Body

logger = logging.getLogger("firefly_scheduling.fires")


class TaskLocker:
    """The lock stage of one runner; thread-safe.

    `holdings` is the runner's lock seen through the holding port, `capabilities` what
    it declares; a fire whose lock is held goes on to `locked_run`. Skips are written
    through `record`; results carry `node`. `keepalive_interval`: seconds between
    renewals (default `lock_ttl / 3`).
    """

    def __init__(
        self,
        holdings: HoldingLock,
        capabilities: LockCapabilities,
        locked_run: LockedRun,
        *,
        record: RunRecorder,
        policy: FirePolicy,
        node: str,
        keepalive_interval: float | None,
    ) -> None:
        self._holdings = holdings
        self._fenced = capabilities.fenced
        self._renewable = capabilities.renewable
        self._keepalive_interval = keepalive_interval
        self._batch_acquires: BatchAcquiringLock | None = None
        if capabilities.batch_acquires and isinstance(holdings, BatchAcquiringLock):
            self._batch_acquires = holdings
        self._locked_run = locked_run
        self._record = record
        self._policy = policy
        self._node = node
        self._holders = LockHolders()
        self._waiter = OverlapWaiter(
            holdings,
            record=record,
            fenced=capabilities.fenced,
            renewable=capabilities.renewable,
            keepalive_interval=keepalive_interval,
        )

    def lock_then_run(
        self, fire: Fire, body: Body, ahead: TaskLockAhead | None, claim_seconds: float | None
    ) -> FireResult:
        """Run `fire` under its task lock (the one taken `ahead`, or taken now), then
        release it; or the result of a fire skipped for its lock (recorded).

        `claim_seconds` is the claim's round trip (None: no claim), for the result.
        """
        lock_name = fire.task.lock_name
        if lock_name is None:  # an unlocked task: it runs on every node
            return self._run(fire, body, None, started_ahead=False, claim=claim_seconds)
        answer = ahead.answer if ahead is not None else self._acquire(fire)
        if isinstance(answer, Holding):
            started_ahead = ahead is not None and ahead.started
            pause_checked = ahead is not None and ahead.pause_checked
            return self._run(
                fire,
                body,
                answer,
                started_ahead=started_ahead,
                claim=claim_seconds,
                pause_checked=pause_checked,
            )
        if answer is not None:
            return self._skip(fire, answer, claim_seconds)
        return self._when_held(fire, body, lock_name, claim_seconds)

    def _when_held(
        self, fire: Fire, body: Body, lock_name: str, claim_seconds: float | None
    ) -> FireResult:
        """What the policy says of `fire`, whose task lock `lock_name` is held: skipped
        (recorded), run alongside without the lock, or run once the lock is free."""
        why = self._holders.why_held(lock_name, fire.target)
        answer = self._policy.when_held(fire, LockHeld(lock_name, why))
        if isinstance(answer, RunAlongside):
            logger.info(
                "%s: fire %s runs alongside the run holding %r (overlap='allow_all')",
                fire.target,
                fire.instant.isoformat(),
                lock_name,
            )
            return self._run(fire, body, None, started_ahead=False, claim=claim_seconds)
        waited = 0.0
        if not isinstance(answer, Skip):
            turn, waited = self._waiter.wait_turn(fire, answer, lock_ttl(fire))
            if isinstance(turn, Holding):
                outcome = self._run(fire, body, turn, started_ahead=False, claim=claim_seconds)
                return replace(outcome, buffered_seconds=waited)
            if not isinstance(turn, Skip):
                return self._skip(fire, turn, claim_seconds)
            answer = turn
        logger.info("%s: fire %s skipped: %s", fire.target, fire.instant.isoformat(), answer.reason)
        self._record.skip(fire, answer.reason)
        return FireResult(
            fire,
            self._node,
            answer.verdict,
            claim_seconds=claim_seconds,
            buffered_seconds=waited or None,
        )

    def _run(
        self,
        fire: Fire,
        body: Body,
        holding: Holding | None,
        *,
        started_ahead: bool,
        claim: float | None,
        pause_checked: bool = False,
    ) -> FireResult:
        """Run `fire` under `holding` (None: without the task lock), then release it.

        `pause_checked`: its batch read the pauses already (`TaskLockAhead`).
        """
        if holding is not None:
            self._holders.note(holding.name, fire.target)
        lost = threading.Event()
        keepalive = None if holding is None else self._keep_alive(fire, holding, lost)
        try:
            outcome = self._locked_run.run_locked(
                fire,
                body,
                holding,
                lost,
                started_ahead=started_ahead,
                claim_seconds=claim,
                pause_checked=pause_checked,
            )
        finally:
            if keepalive is not None:
                keepalive.stop()
            if holding is not None:
                self._holders.forget(holding.name, fire.target)
                self._holdings.release_holding(holding)
        if holding is not None and holding.lost and not outcome.lost:
            logger.error(
                "%s: fire %s: the task lock %r was found lost at its release; another "
                "node may have run meanwhile",
                fire.target,
                fire.instant.isoformat(),
                holding.name,
            )
            outcome = replace(outcome, lost=True)
        return outcome

    def _skip(
        self, fire: Fire, failed: LockBackendError, claim_seconds: float | None
    ) -> FireResult:
        """The result of a fire whose task lock could not be taken, its skip recorded."""
        logger.warning(
            "%s: fire %s skipped: the task lock failed: %s",
            fire.target,
            fire.instant.isoformat(),
            failed,
        )
        self._record.skip(fire, f"the lock backend failed: {failed}")
        return FireResult(
            fire,
            self._node,
            Verdict.BACKEND_ERROR,
            error=str(failed),
            claim_seconds=claim_seconds,
        )

    def _keep_alive(self, fire: Fire, holding: Holding, lost: threading.Event) -> KeepAlive | None:
        """Renew `holding` while `fire`'s bodies run; None where the backend cannot."""
        if not self._renewable:
            return None
        return KeepAlive(
            self._holdings,
            holding,
            holding.ttl_seconds,
            interval=self._keepalive_interval,
            lost=lost,
            label=f"{fire.target} @ {fire.instant.isoformat()}",
        ).start()

    def take_ahead(
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
        answers = batch.acquire_many(requests, fenced=self._fenced)
        return {index: TaskLockAhead(answer) for index, answer in zip(won, answers, strict=True)}

    def _acquire(self, fire: Fire) -> Holding | LockBackendError | None:
        """The task lock of `fire`: the holding, None when held, or the backend's error."""
        try:
            return self._holdings.acquire(
                fire.task.lock_name or "", lock_ttl(fire), fenced=self._fenced
            )
        except LockBackendError as err:
            return err


class LockHolders:
    """The task holding each task lock this process holds now. Thread-safe."""

    def __init__(self) -> None:
        self._targets: dict[str, str] = {}
        self._mutex = threading.Lock()

    def note(self, lock_name: str, target: str) -> None:
        """`target` holds `lock_name` from now on (a lock is not re-entrant: one holder)."""
        with self._mutex:
            self._targets[lock_name] = target

    def forget(self, lock_name: str, target: str) -> None:
        """`target` is about to release `lock_name`."""
        with self._mutex:
            if self._targets.get(lock_name) == target:
                del self._targets[lock_name]

    def why_held(self, lock_name: str, target: str) -> str:
        """Why the fire of `target` found `lock_name` held, in words for the log and history."""
        with self._mutex:
            holder = self._targets.get(lock_name)
        if holder is not None and holder != target:
            return f"the task {holder} holds the lock {lock_name!r} it shares (on this node)"
        if holder is not None or lock_name == target:
            return f"the previous fire still ran (lock {lock_name!r} held)"
        return (
            f"the lock {lock_name!r} is held by another task sharing it, or by a previous "
            "fire of this one"
        )


def lock_ttl(fire: Fire) -> float:
    """The lease of `fire`'s task lock, in seconds."""
    ttl = fire.task.lock_ttl
    return ttl if ttl is not None else DEFAULT_LOCK_TTL_SECONDS
