# async-to-sync: rename AsyncLockedRun LockedRun
# async-to-sync: rename AsyncBodyRunner BodyRunner
# async-to-sync: rename AsyncRunRecorder RunRecorder
# async-to-sync: rename AsyncRunStarter RunStarter
"""The locked run: what happens to a fire while this node holds its task lock.

Written once, for asyncio, in `fires/locked_run_async.py`; `fires/locked_run.py` is
generated from it by `tools/async_to_sync.py`.

The lock stage (`fires.locking`) takes the task lock, keeps it alive and releases
it; in between, this stage:

* **adopts a died run.** Holding the task lock proves no other run of the task is
  alive, so a `running` record in the history is a died (or stalled) run. The newest
  one still within grace is run again here, as attempt `n + 1` under the newer token
  (its zombie's late writes are then refused), once that attempt's start is
  recorded (`fires.starting`); older ones are closed as `expired`.
  At most one extra run per fire, never a flood. A fire this node finished but could
  not record is never adopted: it ran (`RunRecorder.finished_here`). A fire started
  with its claim (`claim_many`) had no running record to adopt. A task with
  `overlap="allow_all"` adopts nothing: its runs alongside hold no task lock, so a
  `running` record may be a live run. Only a record written under an older holding
  of the task lock (a smaller fencing token) is known to have lost it: it is closed
  as `expired` (a late end of that run still writes over it, `record_run`). A run
  alongside, without a token, that died is closed by `prune`;
* checks the lease once more, and hands the fire to the start stage
  (`fires.starting`), and on to the run stage: a lock lost by now skips the fire,
  recorded.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from firefly_scheduling.fires.history_calls_async import off_loop
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.history.port import HistoryError, RunHistory, RunState
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.tasks.overlap import Overlap

if TYPE_CHECKING:
    from collections.abc import Callable

    from firefly_scheduling.fires.recording_async import AsyncRunRecorder
    from firefly_scheduling.fires.running_async import AsyncBodyRunner, Body
    from firefly_scheduling.fires.starting_async import AsyncRunStarter

logger = logging.getLogger("firefly_scheduling.fires")


@dataclass(frozen=True, slots=True)
class DiedRun:
    """A run found `running` in the history while this node holds the task lock: its
    fire (made once, from the record), and the attempt and node the record holds."""

    fire: Fire
    attempt: int
    node: str


class AsyncLockedRun:
    """The locked-run stage of one runner; thread-safe.

    Runs start through `starter`, and `body_runner` checks the lease; died runs are
    read from `history` (none without one) and closed through `record`; results carry
    `node`.
    """

    def __init__(
        self,
        starter: AsyncRunStarter,
        body_runner: AsyncBodyRunner,
        history: RunHistory | None,
        *,
        record: AsyncRunRecorder,
        clock: Callable[[], datetime],
        grace: float,
        node: str,
    ) -> None:
        self._start = starter
        self._body = body_runner
        self._history = history
        self._record = record
        self._clock = clock
        self._grace = grace
        self._node = node

    async def run_locked(
        self,
        fire: Fire,
        body: Body,
        holding: Holding | None,
        lost: threading.Event,
        *,
        started_ahead: bool,
        claim_seconds: float | None,
        pause_checked: bool = False,
    ) -> FireResult:
        """Run `fire`, and the died run it adopts, under its task lock `holding` (None:
        an unlocked task, nothing to adopt), which the keep-alive marks `lost`.

        `started_ahead`: its run was started in the history with its claim, where the
        task had no running record: nothing to adopt (its pre-body check closes the
        record if the lock was lost). `claim_seconds` goes into every result built
        here, rather than into a copy of it: `dataclasses.replace` of a result costs
        more than passing it along. `pause_checked`: its batch read the pauses
        (`TaskLockAhead`).
        """
        adopted: tuple[FireResult, ...] = ()
        if holding is not None and not started_ahead:
            adopted = await self._adopt_or_expire(fire, body, holding, lost)
            if not await self._body.still_held(holding, lost):
                reason = f"the task lock {holding.name!r} was lost before it ran"
                await self._record.skip(fire, reason)
                return FireResult(
                    fire,
                    self._node,
                    Verdict.LOCK_LOST,
                    token=holding.fence,
                    lost=True,
                    claim_seconds=claim_seconds,
                    adopted=adopted,
                )
        outcome = await self._start.start_then_run(
            fire,
            body,
            holding=holding,
            lost=lost,
            started_ahead=started_ahead,
            claim_seconds=claim_seconds,
            pause_checked=pause_checked,
        )
        return replace(outcome, adopted=adopted) if adopted else outcome

    async def _adopt_or_expire(
        self, fire: Fire, body: Body, holding: Holding, lost: threading.Event
    ) -> tuple[FireResult, ...]:
        """Run the died run to adopt; a result for it and for each one expired."""
        adopt, expired = await self._died_runs(fire, holding)
        outcomes = [
            FireResult(
                run.fire,
                self._node,
                Verdict.EXPIRED,
                attempt=run.attempt,
                token=holding.fence,
                adoption=True,
            )
            for run in expired
        ]
        if adopt is not None and await self._body.still_held(holding, lost):
            logger.warning(
                "%s: adopting fire %s: attempt %d on %s stopped holding the task lock",
                adopt.fire.target,
                adopt.fire.instant.isoformat(),
                adopt.attempt,
                adopt.node,
            )
            result = await self._start.start_then_run(
                adopt.fire, body, holding=holding, lost=lost, adopting=adopt.attempt
            )
            outcomes.append(replace(result, adoption=True))
        return tuple(outcomes)

    async def _died_runs(
        self, fire: Fire, holding: Holding
    ) -> tuple[DiedRun | None, tuple[DiedRun, ...]]:
        """The died runs of `fire`'s task, read while `holding` its lock: the newest
        within grace to adopt, and the older ones, closed here as expired."""
        history = self._history
        alongside = fire.task.overlap == Overlap.ALLOW_ALL
        if history is None or (alongside and holding.fence is None):
            return None, ()
        try:
            unfinished = await off_loop(history.unfinished, fire.target, lock=holding.name)
        except HistoryError as err:
            logger.warning(
                "%s: the run history is unavailable, nothing adopted: %s", fire.target, err
            )
            return None, ()
        died = [
            DiedRun(Fire.at(fire.task, record.instant), record.attempt, record.node)
            for record in unfinished
            if record.instant != fire.instant
            and (not alongside or _older_holding(record.token, holding.fence))
        ]
        died = [run for run in died if not self._record.finished_here(run.fire)]
        if not died:
            return None, ()
        now = self._clock()
        within = [run for run in died if (now - run.fire.due).total_seconds() <= self._grace]
        adopt = within[-1] if within and not alongside else None
        expired = tuple(run for run in died if run is not adopt)
        for run in expired:
            reason = (
                f"attempt {run.attempt} on {run.node} stopped holding the task lock "
                "without finishing, and no node adopted it within grace"
                if not alongside
                else f"attempt {run.attempt} on {run.node} lost the task lock without "
                "finishing (a newer holding took it); an allow_all task adopts nothing"
            )
            logger.warning(
                "%s: fire %s expired: %s", fire.target, run.fire.instant.isoformat(), reason
            )
            await self._record.close_unrun(
                run.fire, token=holding.fence, state=RunState.EXPIRED, error=reason
            )
        return adopt, expired


def _older_holding(token: int | None, fence: int | None) -> bool:
    """Whether a record's `token` is of an older holding of the task lock than `fence`,
    the holding this node has now: that run has lost the lock."""
    return token is not None and fence is not None and token < fence
