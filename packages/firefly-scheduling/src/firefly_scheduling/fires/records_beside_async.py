# async-to-sync: rename AsyncRecordsBeside RecordsBeside
"""The records a fire runner writes besides its runs' starts and ends.

A fire that waits for an earlier run of its task is marked `buffered`; the fires a
host passed over (its previous run still went, or it woke late) are recorded as
skipped in one request; and the host reads its task's recent instants to know which
fires it passed over. None of them is retried while the caller waits: a failed mark
is logged, failed skips are remembered (`fires.unrecorded`) and written before the
node's later fires. `fires.recording` extends this with the runs' own records.

Written once, for asyncio, in `fires/records_beside_async.py`; `fires/records_beside.py`
is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from firefly_scheduling.fires.history_calls_async import off_loop
from firefly_scheduling.fires.outcome import Fire, TriggerKind
from firefly_scheduling.fires.unrecorded import UnrecordedSkip, UnrecordedWrites
from firefly_scheduling.history.port import BufferingHistory, HistoryError, RunHistory
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

logger = logging.getLogger("firefly_scheduling.fires")

#: The triggers of fires an operator asked for (`recent_instants` leaves them out).
_ASKED = frozenset({TriggerKind.MANUAL.value, TriggerKind.BACKFILL.value})


class AsyncRecordsBeside:
    """Marks of waiting fires, passed-over skips and the recent instants; thread-safe.

    Without a history, or for an unlocked task, each is a no-op. `unrecorded` keeps
    the skips the history did not take.
    """

    def __init__(
        self,
        history: RunHistory | None,
        *,
        clock: Callable[[], datetime],
        node: str,
        unrecorded: UnrecordedWrites,
    ) -> None:
        self._history = history
        self._clock = clock
        self._node = node
        self._unrecorded = unrecorded

    async def buffered(self, fire: Fire, reason: str) -> None:
        """Mark `fire` as waiting for an earlier run (`buffered`, with `reason`), where
        the history can (`BufferingHistory`). Written once: a failure is logged, not
        remembered, since the fire's start replaces the mark anyway."""
        history: object = self._history  # a `RunHistory` that may buffer too
        lock = fire.task.lock_name
        if lock is None or not isinstance(history, BufferingHistory):
            return
        at = self._clock()
        try:
            await off_loop(
                history.buffer,
                fire.target,
                fire.instant,
                lock=lock,
                node=self._node,
                reason=reason,
                at=at,
            )
        except HistoryError as err:
            logger.warning(
                "%s: fire %s buffered, unrecorded: %s", fire.target, fire.instant.isoformat(), err
            )

    async def passed_over(self, fires: Sequence[Fire], reason: str) -> int:
        """Record the fires of one task a host passed over as skipped, where nothing is
        recorded; how many were new.

        One `skip_many` (a few statements on a SQL store, however many fires), no
        retry (the host is waiting); on a history failure every fire is remembered and
        written before later fires.
        """
        history = self._history
        if history is None or not fires:
            return 0
        task = fires[0].task
        lock = task.lock_name
        if lock is None:
            return 0
        if any(fire.task is not task for fire in fires):
            raise ValueError(f"{task.target}: passed-over fires are recorded one task at a time")
        at = self._clock()
        try:
            return await off_loop(
                history.skip_many,
                task.target,
                [fire.instant for fire in fires],
                lock=lock,
                node=self._node,
                reason=reason,
                at=at,
            )
        except HistoryError as err:
            logger.warning(
                "%s: %d passed-over fire(s) from %s unrecorded (retried before the next fires): %s",
                task.target,
                len(fires),
                min(fire.instant for fire in fires).isoformat(),
                err,
            )
        for fire in fires:
            self._unrecorded.remember(UnrecordedSkip(lock, fire, self._node, reason, at))
        return 0

    async def recent_instants(self, task: ScheduledDescriptor, limit: int) -> list[datetime]:
        """The instants of the task's newest `limit` history records of fires its
        schedule named, newest first.

        An empty list without a history, for an unlocked task, for a task never
        recorded, or when the history cannot be read (logged; the fires it would have
        named stay unnamed). A record an operator asked for (a manual trigger, named
        by its time off the schedule; a backfill, written now for an instant of the
        past) says nothing of when the fleet was up, and is left out.
        """
        history, lock = self._history, task.lock_name
        if history is None or lock is None:
            return []
        try:
            records = await off_loop(history.runs, task.target, limit, lock=lock)
        except HistoryError as err:
            logger.warning("%s: its newest history records are unreadable: %s", task.target, err)
            return []
        return [record.instant for record in records if record.trigger not in _ASKED]
