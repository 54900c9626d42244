# Generated from recording_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`RunRecorder`: the record stage of a fire, the history writes that never stop it.

Written once, for asyncio, in `fires/recording_async.py`; `fires/recording.py` is
generated from it by `tools/async_to_sync.py`. The asyncio flavour calls the
(synchronous) run history in a worker thread (`off_loop`).

What it holds to (docs/guarantees.md, "What the run history records"):

* **Every run that ran is recorded, with its real outcome.** The end of a run is
  written with `finish` where its start was recorded. Where it was not (the
  history failed or timed out at the start), or where the finish is refused, it is
  written with `record_run`, which writes the whole record where the fire has none
  or a skip, and otherwise says whose the record is.
* **A finished fire is never adopted.** A `running` record is how a died run is
  found and run again, by the next node to hold the task lock. So the end of a run
  that ran is retried while the caller keeps the task lock renewed: until it is
  written, or until the fire is past `grace + clock_skew` by this node's clock, when
  no node adopts it any more (an adopter must find it within `grace` by its own
  clock, at most `clock_skew` off); and for `FINISH_RETRY_SECONDS` at least. Still
  unwritten then, it is remembered (`fires.unrecorded`), written before later fires
  and at shutdown, and never adopted by this node.
* **`fenced` means fenced.** A run's end is reported fenced only when a newer attempt
  owns the fire's record (`Recorded.FENCED`).

A skip is retried for `SKIP_RETRY_SECONDS`, then remembered. The close of a record
whose body never ran (a died run found too late, a lock lost before the body) is
retried for `FINISH_RETRY_SECONDS` and not remembered: a record left `running` is
adopted or expired by the task's next fire, and running a fire that never ran is
what adoption is for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import ParamSpec, TypeAlias, TypeVar

from firefly_scheduling.fires.outcome import Verdict, closing_state
from firefly_scheduling.fires.unrecorded import UnrecordedFinish, UnrecordedSkip, UnrecordedWrites
from firefly_scheduling.history.port import HistoryError, Recorded, RunHistory

logger = logging.getLogger("firefly_scheduling.fires")

_T = TypeVar("_T")
_P = ParamSpec("_P")

#: A history write the retry loop repeats.
Write: TypeAlias = Callable[[], _T]

#: The shortest time the end of a run is retried, holding the task lock.
FINISH_RETRY_SECONDS = 10.0
#: How long the record of a skipped fire is retried.
SKIP_RETRY_SECONDS = 2.0


class RunRecorder:
    """The history writes of one fire runner; thread-safe. Without a history, no-ops.

    `clock` is the runner's wall clock (aware UTC); `grace` and `clock_skew` its
    window, which bounds how long the end of a run is retried.
    """

    def __init__(
        self,
        history: RunHistory | None,
        *,
        clock: Callable[[], datetime],
        node: str,
        grace: float,
        clock_skew: float,
    ) -> None:
        self._history = history
        self._clock = clock
        self._node = node
        self._adoptable = timedelta(seconds=grace + clock_skew)
        self._unrecorded = UnrecordedWrites(horizon_seconds=grace + clock_skew)

    def end_of_run(
        self, run: UnrecordedFinish, *, started: bool, finished: bool = True
    ) -> Recorded | None:
        """Write the end of a run whose body ran; whose the record is now.

        `started`: the history recorded the run's start. `finished`: the body returned
        or raised an `Exception`; one interrupted (`KeyboardInterrupt`, `SystemExit`,
        cancelled) did not finish its fire, which may be adopted, so its end is
        retried for `FINISH_RETRY_SECONDS` only. None without a history, or when the
        write still failed at its deadline (it is remembered then).
        """
        history = self._history
        if history is None:
            return None
        left = (run.instant + self._adoptable - self._clock()).total_seconds()
        patience = max(FINISH_RETRY_SECONDS, left) if finished else FINISH_RETRY_SECONDS
        deadline = time.monotonic() + patience
        try:
            if started:
                closed = _retrying(
                    lambda: off_loop(
                        history.finish,
                        run.target,
                        run.instant,
                        lock=run.lock,
                        token=run.token,
                        state=run.state,
                        error=run.error,
                        at=run.ended_at,
                    ),
                    deadline,
                )
                if closed:
                    return Recorded.WRITTEN
            # No start recorded, or the finish refused: the whole record, or whose it is.
            recorded = _retrying(lambda: off_loop(run.write, history), deadline)
        except HistoryError as err:
            logger.warning(
                "%s: fire %s ended %s, unrecorded (retried before the next fires): %s",
                run.target,
                run.instant.isoformat(),
                run.state,
                err,
            )
            self._unrecorded.remember(run)
            return None
        if recorded is Recorded.FENCED:
            logger.warning(
                "%s: fire %s: this run's end (%s, token %s) is not recorded: a newer "
                "attempt owns the fire's record",
                run.target,
                run.instant.isoformat(),
                run.state,
                run.token,
            )
        elif not started:
            logger.info(
                "%s: fire %s: its run is recorded whole at its end (%s)",
                run.target,
                run.instant.isoformat(),
                run.state,
            )
        return recorded

    def close_unrun(
        self,
        lock: str,
        target: str,
        instant: datetime,
        *,
        token: int | None,
        verdict: Verdict,
        error: str | None,
    ) -> None:
        """Close a started record whose body never ran, as `verdict` (see the module doc)."""
        history = self._history
        if history is None:
            return
        state, at = closing_state(verdict), self._clock()
        try:
            closed = _retrying(
                lambda: off_loop(
                    history.finish,
                    target,
                    instant,
                    lock=lock,
                    token=token,
                    state=state,
                    error=error,
                    at=at,
                ),
                time.monotonic() + FINISH_RETRY_SECONDS,
            )
        except HistoryError as err:
            logger.warning(
                "%s: fire %s: its record could not be closed as %s (the task's next fire "
                "adopts or expires it): %s",
                target,
                instant.isoformat(),
                state,
                err,
            )
            return
        if not closed:
            logger.info(
                "%s: fire %s: its record was not closed as %s: it is finished, or a newer "
                "attempt owns it",
                target,
                instant.isoformat(),
                state,
            )

    def skip(
        self,
        lock: str,
        target: str,
        instant: datetime,
        reason: str,
        *,
        patience: float | None = None,
    ) -> None:
        """Record the fire as skipped, retried for `patience` seconds (by default
        `SKIP_RETRY_SECONDS`), then remembered."""
        history = self._history
        if history is None:
            return
        skipped = UnrecordedSkip(lock, target, instant, self._node, reason, self._clock())
        seconds = SKIP_RETRY_SECONDS if patience is None else patience
        try:
            _retrying(lambda: off_loop(skipped.write, history), time.monotonic() + seconds)
        except HistoryError as err:
            logger.warning(
                "%s: skip of fire %s unrecorded (retried before the next fires): %s",
                target,
                instant.isoformat(),
                err,
            )
            self._unrecorded.remember(skipped)

    def remember_skips(
        self, lock: str, target: str, instants: Sequence[datetime], reason: str, at: datetime
    ) -> None:
        """Remember skips a failed history did not take, to write before later fires."""
        for instant in instants:
            self._unrecorded.remember(UnrecordedSkip(lock, target, instant, self._node, reason, at))

    def finished_here(self, lock: str, target: str, instant: datetime) -> bool:
        """Whether this node ran the fire to its end although the history says otherwise."""
        return self._unrecorded.finished_here(lock, target, instant)

    def retry_unrecorded(self, *, immediately: bool = False) -> None:
        """Write what is remembered (see `UnrecordedWrites.retry`)."""
        if len(self._unrecorded):  # the common case costs no thread hop
            off_loop(self._unrecorded.retry, self._history, self._clock, immediately=immediately)


def _retrying(write: Write[_T], deadline: float) -> _T:
    """`write()`, tried again on `HistoryError` (backing off) until `deadline` (monotonic)."""
    pause = 0.05
    while True:
        try:
            return write()
        except HistoryError:
            if time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def off_loop(call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """`call(*args, **kwargs)`: the synchronous runner already runs off any loop."""
    return call(*args, **kwargs)
