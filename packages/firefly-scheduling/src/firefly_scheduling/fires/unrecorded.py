"""History writes a node could not make, remembered until the history has them.

Two writes matter after the fact:

* **The end of a run that ran.** Every run that ran is recorded, and a `running`
  record is how a died run is found and adopted: if the end of a run that FINISHED
  is not written (the history is unreachable), the next fire would adopt it and run
  the body a second time. So the runner retries that write while it holds the task
  lock, until no node could adopt the fire any more (`fires.recording`), and when it
  still fails, remembers the whole run here: it is written later (`record_run`,
  start and end, wherever the fire has no record, a skip, or an older attempt's),
  and never adopted by this node meanwhile.
* **A skip.** Every fire ends up run or recorded with a reason. A skip the history
  refused (retried for a while first), and the passed-over fires of a batch that a
  history failure cut short, would otherwise leave fires neither run nor recorded
  (found by `benchmarks/chaos.py`, a history outage on PostgreSQL).
* **The close of a record whose body never ran, of an `allow_all` task.** Another
  task's next fire adopts or expires a record left `running`; an `allow_all` task's
  adopts nothing (a `running` record may be a live run alongside), so the close is
  kept here, or the fire would be neither run nor recorded with a reason.

Each remembered write is tried again before every later fire and at shutdown. A
write the history answers is forgotten: written, or not needed (the fire's record is
a newer attempt's, or, for a skip, any run's). Memory is bounded: a write is kept for
`MEMORY_SECONDS` (or `horizon_seconds`, grace + clock skew, when longer: a finish is
never forgotten while a node could still adopt its fire), and at most
`MAX_REMEMBERED` writes are kept. What is forgotten unwritten is logged by task and
instant, never dropped in silence.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.history.port import HistoryError, Recorded, RunHistory, RunState

logger = logging.getLogger("firefly_scheduling.fires")

#: How long a write the history did not take is kept for another attempt.
MEMORY_SECONDS = 3600.0
#: The most writes remembered at once; past it the oldest are forgotten, with a log line.
MAX_REMEMBERED = 10_000
#: The most remembered writes one fire's worker retries before its own fire; the
#: rest wait for later fires (all of them at shutdown).
WRITES_PER_ROUND = 16
#: After a round that found the history still down, the next waits this long, so a
#: history that fails slowly (a timeout) does not delay every fire by its timeout.
RETRY_PAUSE_SECONDS = 1.0


@dataclass(frozen=True)
class FireWrite:
    """A write of `fire`'s record by `node`; `lock` is the fire's task lock name, half
    of the record's key."""

    lock: str
    fire: Fire
    node: str

    @property
    def target(self) -> str:
        return self.fire.target

    @property
    def instant(self) -> datetime:
        return self.fire.instant


@dataclass(frozen=True)
class UnrecordedFinish(FireWrite):
    """The end of a run of `fire` that ran on `node`, with its start: the run's whole
    record."""

    token: int | None
    state: RunState
    error: str | None
    started_at: datetime
    ended_at: datetime

    def write(self, history: RunHistory) -> Recorded:
        """Write the whole run (`RunHistory.record_run`); whose the record is now."""
        return history.record_run(
            self.fire.target,
            self.fire.instant,
            lock=self.lock,
            node=self.node,
            token=self.token,
            state=self.state,
            error=self.error,
            started_at=self.started_at,
            ended_at=self.ended_at,
            trigger=self.fire.recorded_trigger,
            requested_by=self.fire.asked_by,
        )

    def written(self, history: RunHistory) -> str | None:
        """Write it; None when the record holds this run now, else why it does not."""
        if self.write(history) is Recorded.FENCED:
            return f"a newer attempt owns the fire's record (this run's token: {self.token})"
        return None

    @property
    def what(self) -> str:
        return f"run ({self.state})"


@dataclass(frozen=True)
class UnrecordedSkip(FireWrite):
    """The record of a fire nobody ran, which the history refused."""

    reason: str
    at: datetime

    def write(self, history: RunHistory) -> bool:
        """Write it where nothing is recorded yet; whether it was new (False: the fire
        has a record already, a run elsewhere keeps it)."""
        return history.skip(
            self.fire.target,
            self.fire.instant,
            lock=self.lock,
            node=self.node,
            reason=self.reason,
            at=self.at,
            trigger=self.fire.recorded_trigger,
            requested_by=self.fire.asked_by,
        )

    def written(self, history: RunHistory) -> str | None:
        """Write it; None when it was, else why it was not needed."""
        return None if self.write(history) else "the fire has a record already"

    @property
    def what(self) -> str:
        return "skip"


@dataclass(frozen=True)
class UnrecordedClose(FireWrite):
    """The close of the started record of `fire`, whose body never ran, as `state`
    with `error`: under `token`, as `RunHistory.finish` writes it.

    `start_unknown`: the run's `start` went unanswered (a lost reply may hide a
    write): where the history has no such `running` record, the fire is recorded
    skipped with `error` as its reason instead, where nothing is recorded.
    """

    token: int | None
    state: RunState
    error: str
    at: datetime
    start_unknown: bool = False

    def write(self, history: RunHistory) -> bool:
        """Close the record where it is still this run's, `running` (else, with
        `start_unknown`, skip the fire where nothing is recorded); whether it was."""
        closed = history.finish(
            self.fire.target,
            self.fire.instant,
            lock=self.lock,
            token=self.token,
            state=self.state,
            error=self.error,
            at=self.at,
        )
        if closed or not self.start_unknown:
            return closed
        return UnrecordedSkip(self.lock, self.fire, self.node, self.error, self.at).write(history)

    def written(self, history: RunHistory) -> str | None:
        """Write it; None when it was, else why it was not needed."""
        return None if self.write(history) else "it is finished, or a newer attempt owns it"

    @property
    def what(self) -> str:
        return f"close ({self.state})"


Unrecorded = UnrecordedFinish | UnrecordedSkip | UnrecordedClose


class UnrecordedWrites:
    """Thread-safe memory of unrecorded finishes, closes and skips, keyed by fire."""

    def __init__(self, *, horizon_seconds: float) -> None:
        self._memory = timedelta(seconds=max(horizon_seconds, MEMORY_SECONDS))
        self._mutex = threading.Lock()
        self._pending: dict[tuple[str, str, datetime], Unrecorded] = {}
        self._next_round = 0.0

    def remember(self, write: Unrecorded) -> None:
        """Keep `write` for a later attempt; a finish or a close outranks a skip of the
        same fire."""
        key = (write.lock, write.target, write.instant)
        with self._mutex:
            pending = self._pending.get(key)
            if (
                pending is not None
                and not isinstance(pending, UnrecordedSkip)
                and isinstance(write, UnrecordedSkip)
            ):
                return
            self._pending[key] = write
            dropped = []
            while len(self._pending) > MAX_REMEMBERED:  # the oldest first (insertion order)
                dropped.append(self._pending.pop(next(iter(self._pending))))
        for gone in dropped:
            _forgotten(gone, f"more than {MAX_REMEMBERED} history writes were pending")

    def finished_here(self, lock: str, fire: Fire) -> bool:
        """Whether this node ran `fire` to its end although the history says otherwise."""
        with self._mutex:
            pending = self._pending.get((lock, fire.target, fire.instant))
        return isinstance(pending, UnrecordedFinish)

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
                    unneeded = write.written(history)
                except HistoryError:
                    reachable = False
                    self._next_round = time.monotonic() + RETRY_PAUSE_SECONDS
                else:
                    logger.info(
                        "%s: fire %s: its %s %s",
                        write.target,
                        write.instant.isoformat(),
                        write.what,
                        "is recorded now" if unneeded is None else f"is not recorded: {unneeded}",
                    )
                    self._forget(write)
                    continue
            if now - write.instant > self._memory:
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
