"""History writes a node could not make, remembered until the history has them.

Two writes matter after the fact:

* **A finish.** A `running` record in the history is how a died run is found and
  adopted. If the final write of a run that FINISHED fails (the history is
  unreachable for a moment), the record still says `running`, and the next fire
  would adopt it and run the body a second time. So the runner retries that write
  for a while (holding the task lock, so no other node can adopt meanwhile), and
  when it still fails, remembers the fire here: it is never adopted by this node.
* **A skip.** Every fire ends up run or recorded with a reason. A skip the history
  refused (retried for a while first), and the passed-over fires of a batch that a
  history failure cut short, would otherwise leave fires neither run nor recorded
  (found by `benchmarks/chaos.py`, a history outage on PostgreSQL).

Each remembered write is tried again before every later fire and at shutdown.
Memory is bounded: a finish past `horizon_seconds` (grace + clock skew) after its
instant is adopted by no node any more, so forgetting it loses nothing; a skip is
kept for `SKIP_MEMORY_SECONDS`, and at most `MAX_REMEMBERED` writes are kept. What is
forgotten unwritten is logged by task and instant, never dropped in silence.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from firefly_scheduling.history.port import HistoryError, RunHistory, RunState

logger = logging.getLogger("firefly_scheduling.fires")

#: How long a skip the history refused is kept for another attempt.
SKIP_MEMORY_SECONDS = 3600.0
#: The most writes remembered at once; past it the oldest are forgotten, with a log line.
MAX_REMEMBERED = 10_000
#: The most remembered writes one fire's worker retries before its own fire; the
#: rest wait for later fires (all of them at shutdown).
WRITES_PER_ROUND = 16
#: After a round that found the history still down, the next waits this long, so a
#: history that fails slowly (a timeout) does not delay every fire by its timeout.
RETRY_PAUSE_SECONDS = 1.0


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

    def write(self, history: RunHistory) -> None:
        """Write it; accepted, or refused because a newer attempt owns the record."""
        history.finish(
            self.target,
            self.instant,
            lock=self.lock,
            token=self.token,
            state=self.state,
            error=self.error,
            at=self.ended_at,
        )

    @property
    def what(self) -> str:
        return str(self.state)


@dataclass(frozen=True)
class UnrecordedSkip:
    """The record of a fire nobody ran, which the history refused."""

    lock: str
    target: str
    instant: datetime
    node: str
    reason: str
    at: datetime

    def write(self, history: RunHistory) -> None:
        """Write it where nothing is recorded yet (a run elsewhere keeps its record)."""
        self.write_new(history)

    def write_new(self, history: RunHistory) -> bool:
        """Write it; whether it was new (False: the fire has a record already)."""
        return history.skip(
            self.target,
            self.instant,
            lock=self.lock,
            node=self.node,
            reason=self.reason,
            at=self.at,
        )

    @property
    def what(self) -> str:
        return "skip"


Unrecorded = UnrecordedFinish | UnrecordedSkip


class UnrecordedWrites:
    """Thread-safe memory of unrecorded finishes and skips, keyed by fire."""

    def __init__(self, *, horizon_seconds: float) -> None:
        self._horizons = {
            UnrecordedFinish: timedelta(seconds=horizon_seconds),
            UnrecordedSkip: timedelta(seconds=max(horizon_seconds, SKIP_MEMORY_SECONDS)),
        }
        self._mutex = threading.Lock()
        self._pending: dict[tuple[str, str, datetime], Unrecorded] = {}
        self._next_round = 0.0

    def remember(self, write: Unrecorded) -> None:
        """Keep `write` for a later attempt; a finish outranks a skip of the same fire."""
        key = (write.lock, write.target, write.instant)
        with self._mutex:
            if isinstance(self._pending.get(key), UnrecordedFinish) and isinstance(
                write, UnrecordedSkip
            ):
                return
            self._pending[key] = write
            dropped = []
            while len(self._pending) > MAX_REMEMBERED:  # the oldest first (insertion order)
                dropped.append(self._pending.pop(next(iter(self._pending))))
        for gone in dropped:
            _forgotten(gone, f"more than {MAX_REMEMBERED} history writes were pending")

    def finished_here(self, lock: str, target: str, instant: datetime) -> bool:
        """Whether this node ran the fire to its end although the history says otherwise."""
        with self._mutex:
            return isinstance(self._pending.get((lock, target, instant)), UnrecordedFinish)

    def __len__(self) -> int:
        with self._mutex:
            return len(self._pending)

    def retry(
        self,
        history: RunHistory | None,
        clock: Callable[[], datetime],
        *,
        immediately: bool = False,
    ) -> None:
        """Write every remembered write again; forget those written, refused or too old.

        The first failure ends the round: the history is still down, and the writes
        left wait for the next round, `RETRY_PAUSE_SECONDS` later at the earliest
        (`immediately=True`, at shutdown, does not wait), rather than each waiting out its
        own timeout.
        """
        with self._mutex:
            if not self._pending or (not immediately and time.monotonic() < self._next_round):
                return
            pending = list(self._pending.values())
            if not immediately:  # a fire's worker pays for a few, not for a backlog
                pending = pending[:WRITES_PER_ROUND]
        now = clock()
        reachable = history is not None
        for write in pending:
            if reachable and history is not None:
                try:
                    write.write(history)
                except HistoryError:
                    reachable = False
                    self._next_round = time.monotonic() + RETRY_PAUSE_SECONDS
                else:
                    logger.info(
                        "%s: fire %s: its %s is recorded now",
                        write.target,
                        write.instant.isoformat(),
                        write.what,
                    )
                    self._forget(write)
                    continue
            if now - write.instant > self._horizons[type(write)]:
                self._forget(write)
                _forgotten(write, "the history stayed unreachable")

    def _forget(self, write: Unrecorded) -> None:
        with self._mutex:
            self._pending.pop((write.lock, write.target, write.instant), None)


def _forgotten(write: Unrecorded, why: str) -> None:
    logger.error(
        "%s: fire %s: its %s is forgotten unrecorded: %s",
        write.target,
        write.instant.isoformat(),
        write.what,
        why,
    )
