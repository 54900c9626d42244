"""Fires this node finished but could not record, remembered until the history has them.

A `running` record in the history is how a died run is found and adopted. If the
final write of a run that FINISHED fails (the history is unreachable for a moment),
the record still says `running`, and the next fire would adopt it and run the body a
second time. So the runner retries that write for a while (holding the task lock,
so no other node can adopt meanwhile), and when it still fails, remembers the fire
here: it is never adopted by this node, and the write is tried again before every
later fire and at shutdown.

Memory is bounded by time: past `horizon_seconds` (grace + clock skew) after its
instant no node adopts a fire any more, so forgetting it then loses nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from firefly_scheduling.history.port import HistoryError, RunHistory, RunState

logger = logging.getLogger("firefly_scheduling.fires")


@dataclass(frozen=True)
class UnrecordedFinish:
    """The final write a run could not make."""

    lock: str
    target: str
    instant: datetime
    token: int | None
    state: RunState
    error: str | None
    ended_at: datetime


class UnrecordedFinishes:
    """Thread-safe memory of `UnrecordedFinish`es, keyed by fire."""

    def __init__(self, *, horizon_seconds: float) -> None:
        self._horizon = timedelta(seconds=horizon_seconds)
        self._mutex = threading.Lock()
        self._pending: dict[tuple[str, str, datetime], UnrecordedFinish] = {}

    def remember(self, finish: UnrecordedFinish) -> None:
        with self._mutex:
            self._pending[(finish.lock, finish.target, finish.instant)] = finish

    def finished_here(self, lock: str, target: str, instant: datetime) -> bool:
        """Whether this node ran the fire to its end although the history says otherwise."""
        with self._mutex:
            return (lock, target, instant) in self._pending

    def __len__(self) -> int:
        with self._mutex:
            return len(self._pending)

    def retry(self, history: RunHistory | None, clock: Callable[[], datetime]) -> None:
        """Write every remembered finish again; forget those written, refused or too old."""
        with self._mutex:
            if not self._pending:
                return
            pending = list(self._pending.values())
        now = clock()
        for finish in pending:
            if history is not None and self._written(history, finish):
                logger.info(
                    "%s: fire %s: its %s is recorded now",
                    finish.target,
                    finish.instant.isoformat(),
                    finish.state,
                )
            elif now - finish.instant <= self._horizon:
                continue
            with self._mutex:
                self._pending.pop((finish.lock, finish.target, finish.instant), None)

    @staticmethod
    def _written(history: RunHistory, finish: UnrecordedFinish) -> bool:
        try:
            history.finish(
                finish.target,
                finish.instant,
                lock=finish.lock,
                token=finish.token,
                state=finish.state,
                error=finish.error,
                at=finish.ended_at,
            )
        except HistoryError:
            return False
        return True  # accepted, or refused because a newer attempt owns the record
