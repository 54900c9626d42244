# async-to-sync: rename AsyncAdoption Adoption
# async-to-sync: rename AsyncRunRecorder RunRecorder
"""`AsyncAdoption`: which died runs of a task a fire adopts, and which expire.

Written once, for asyncio, in `fires/adoption_async.py`; `fires/adoption.py` is
generated from it by `tools/async_to_sync.py`.

Holding the task lock proves no other run of the task is alive, so a `running`
record in the history is a died (or stalled) run. The newest one still within grace
is adopted: the runner runs it again, as attempt `n + 1` under the newer token (its
zombie's late writes are then refused). Older ones are closed as `expired`. At most
one extra run per fire, never a flood. A fire this node finished but could not
record is never adopted: it ran (`RunRecorder.finished_here`).

Each died run is a fire of its own, made once from its record (`Fire.at`, a
scheduled fire) and passed as it is to the run and the record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from firefly_scheduling.fires.history_calls_async import off_loop
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.recording_async import AsyncRunRecorder
from firefly_scheduling.history.port import HistoryError, RunHistory
from firefly_scheduling.locks.holding import Holding

logger = logging.getLogger("firefly_scheduling.fires")


@dataclass(frozen=True, slots=True)
class DiedRun:
    """A run found `running` in the history while this node holds the task lock: its
    fire (made once, from the record), and the attempt and node the record holds."""

    fire: Fire
    attempt: int
    node: str


@dataclass(frozen=True, slots=True)
class DiedRuns:
    """The died runs of a task: the one to run again here, and those closed as expired."""

    adopt: DiedRun | None = None
    expired: tuple[DiedRun, ...] = ()


NO_DIED_RUNS = DiedRuns()


class AsyncAdoption:
    """Finds the died runs of the fires of one runner; thread-safe. Without a history,
    there are none."""

    def __init__(
        self,
        history: RunHistory | None,
        *,
        record: AsyncRunRecorder,
        clock: Callable[[], datetime],
        grace: float,
    ) -> None:
        self._history = history
        self._record = record
        self._clock = clock
        self._grace = grace

    async def died_runs(self, fire: Fire, holding: Holding) -> DiedRuns:
        """The died runs of `fire`'s task, read while `holding` its lock: the newest
        within grace to adopt, the older ones closed here as expired."""
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
            logger.warning(
                "%s: fire %s expired: %s", fire.target, run.fire.instant.isoformat(), reason
            )
            await self._record.close_unrun(
                run.fire, token=holding.fence, verdict=Verdict.EXPIRED, error=reason
            )
        return DiedRuns(adopt, expired)
