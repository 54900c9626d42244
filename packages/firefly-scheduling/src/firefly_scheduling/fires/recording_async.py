# async-to-sync: rename AsyncRecordsBeside RecordsBeside
# async-to-sync: rename AsyncRunRecorder RunRecorder
"""`AsyncRunRecorder`: the record stage of a fire, the history writes that never stop it.

The run stage (`fires.running`) hands each run's end here (`finish`), the last stage
of a fire; the earlier stages record their skips through it too.

Written once, for asyncio, in `fires/recording_async.py`; `fires/recording.py` is
generated from it by `tools/async_to_sync.py`. The asyncio flavour calls the
(synchronous) run history in a worker thread (`off_loop`, `fires.history_calls`).

Every write takes the `Fire` the host made and hands its task and instant to the
history as they are. Only a locked task's fires are recorded (the lock name is half
of a record's key); for any other fire, and without a history, each write is a no-op.

What it holds to (docs/guarantees.md, "What the run history records"):

* **Every run that ran is recorded, with its real outcome.** The end of a run is
  written with `finish` where its start was recorded. Where it was not (the
  history failed or timed out at the start), or where the finish is refused, it is
  written with `record_run`, which writes the whole record where the fire has none
  or a skip, or over the run's own expiry (`history.base.late_end`), else says whose it is.
* **A finished fire is never adopted.** A `running` record is how a died run is
  found and run again, by the next node to hold the task lock. So the end of a run
  that ran is retried while the caller keeps the task lock renewed: until it is
  written, or until the fire is past `grace + clock_skew` by this node's clock, when
  no node adopts it any more (an adopter must find it within `grace` by its own
  clock, at most `clock_skew` off), counted from the run's start for a caught-up
  fire (due long before); and for `FINISH_RETRY_SECONDS` at least. Still
  unwritten then, it is remembered (`fires.unrecorded`), written before later fires
  and at shutdown, and never adopted by this node.
* **`fenced` means fenced.** A run's end is reported fenced only when a newer attempt
  owns the fire's record (`Recorded.FENCED`).

A skip is retried for `SKIP_RETRY_SECONDS`, then remembered. The close of a record
whose body never ran (a died run found too late, a lock lost before the body) is
retried for `FINISH_RETRY_SECONDS` and not remembered: a record left `running` is
adopted or expired by the task's next fire, and running a fire that never ran is
what adoption is for. An `allow_all` task adopts nothing (a `running` record may be
a live run alongside), so its close is remembered. The fires a host passed over are
written in one request, not retried (the host is waiting). Starts are the start
stage's (`fires.starting`).
"""

from __future__ import annotations

import asyncio  # sync: drop
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypeAlias, TypeVar

from firefly_scheduling.fires.atomic import RecordReadingHistory
from firefly_scheduling.fires.history_calls_async import off_loop
from firefly_scheduling.fires.outcome import (
    BodyNotRun,
    Fire,
    FireResult,
    Started,
    TriggerKind,
    Verdict,
)
from firefly_scheduling.fires.policy import BodyEnded, FirePolicy, InTransaction
from firefly_scheduling.fires.records_beside_async import AsyncRecordsBeside
from firefly_scheduling.fires.run_end import WrittenEnd
from firefly_scheduling.fires.unrecorded import (
    UnrecordedClose,
    UnrecordedFinish,
    UnrecordedSkip,
    UnrecordedWrites,
)
from firefly_scheduling.history.port import (
    HistoryError,
    Recorded,
    RunHistory,
    RunRecord,
    RunState,
)
from firefly_scheduling.tasks.overlap import Overlap

logger = logging.getLogger("firefly_scheduling.fires")

#: The shortest time the end of a run is retried, holding the task lock.
FINISH_RETRY_SECONDS = 10.0
#: How long the record of a skipped fire is retried.
SKIP_RETRY_SECONDS = 2.0


class AsyncRunRecorder(AsyncRecordsBeside):
    """The history writes of one fire runner; thread-safe. Without a history, no-ops.

    The records besides a run's (a fire waiting, the fires a host passed over) are
    `AsyncRecordsBeside`'s.

    `clock` is the runner's wall clock (aware UTC); `grace` and `clock_skew` its
    window, which bounds how long the end of a run is retried. `policy` is told of
    each run's end just before it is written (`FirePolicy.at_record`).
    """

    def __init__(
        self,
        history: RunHistory | None,
        *,
        clock: Callable[[], datetime],
        node: str,
        grace: float,
        clock_skew: float,
        policy: FirePolicy,
    ) -> None:
        super().__init__(
            history,
            clock=clock,
            node=node,
            unrecorded=UnrecordedWrites(horizon_seconds=grace + clock_skew),
        )
        self._policy = policy
        self._adoptable = timedelta(seconds=grace + clock_skew)

    @property
    def history(self) -> RunHistory | None:
        """The run history written here (a body's `atomic` block writes through it too)."""
        return self._history

    async def finish(
        self,
        fire: Fire,
        ended: BodyEnded | BodyNotRun,
        end: WrittenEnd,
        *,
        started: Started,
        claim_seconds: float | None,
    ) -> FireResult:
        """Record how the run of `fire` ended, as `end` says (`fires.run_end`: which
        retry it was, and what comes next), and say what happened to the fire, with
        the retry to run: the run stage's last step.

        `started`: how the start stage left the run. A body that never ran (its task
        lock lost first) closes the started record, or records a skip where nothing
        was recorded: nobody ran it. Of an `allow_all` task, whose records nothing
        adopts, a start left unanswered may still have been written (its reply
        lost): its record is closed where it is, the fire skipped where it is not.
        """
        if isinstance(ended, BodyNotRun):
            if started.recorded or fire.task.overlap == Overlap.ALLOW_ALL:
                await self.close_unrun(
                    fire,
                    token=ended.token,
                    state=end.state,
                    error=ended.error,
                    start_unknown=not started.recorded,
                )
            else:
                await self.skip(fire, ended.error)
            return FireResult(
                fire,
                self._node,
                ended.verdict,
                attempt=ended.attempt,
                token=ended.token,
                lost=True,
                error=ended.error,
                claim_seconds=claim_seconds,
            )
        recorded = await self.end_of_run(fire, ended, end, started=started.recorded)
        if ended.in_transaction and recorded is Recorded.ALREADY:
            ended = _committed(fire, ended)
        return FireResult(
            fire,
            self._node,
            ended.verdict,
            attempt=ended.attempt,
            token=ended.token,
            started_at=ended.started_at,
            ended_at=ended.ended_at,
            lost=ended.lost,
            fenced=recorded is Recorded.FENCED,
            error=ended.error,
            claim_seconds=claim_seconds,
            retry=end.retry.fire,
        )

    async def end_of_run(
        self, fire: Fire, ended: BodyEnded, end: WrittenEnd, *, started: bool
    ) -> Recorded | None:
        """Write the end of a run of `fire` whose body ran (`fires.run_end`); whose the
        record is now.

        `started`: the history recorded the run's start. A body interrupted
        (`KeyboardInterrupt`, `SystemExit`, cancelled: not `ended.finished`) did not
        finish its fire, which may be adopted, so its end is retried for
        `FINISH_RETRY_SECONDS` only. None without a history, or when the write still
        failed at its deadline (it is remembered then).

        A run whose body wrote its success in its own transaction (the policy answers
        `InTransaction`) sends no `finish`: where the history reads one record
        (`RecordReadingHistory`), that read finds the success committed, and nothing
        is written again, whatever the body did after the block (`Recorded.ALREADY`);
        otherwise `record_run` finds the same, or closes the still-running record
        with the body's end when the transaction did not commit.
        """
        history, lock = self._history, fire.task.lock_name
        if history is None or lock is None:
            return None
        state, error = end.state, end.text
        in_transaction = isinstance(self._policy.at_record(fire, ended), InTransaction)
        # A caught-up fire is due long before it runs: counted from its due time it
        # would get the shortest retry, and the next fire, finding its record still
        # `running`, would close it `expired`. It is retried as long as an on-time
        # fire's end, counted from its start.
        since = ended.started_at if fire.trigger is TriggerKind.CATCH_UP else fire.due
        left = (since + self._adoptable - self._clock()).total_seconds()
        patience = max(FINISH_RETRY_SECONDS, left) if ended.finished else FINISH_RETRY_SECONDS
        deadline = time.monotonic() + patience
        run = UnrecordedFinish(
            lock,
            fire,
            self._node,
            ended.token,
            state,
            error,
            ended.started_at,
            ended.ended_at,
        )
        try:
            if started and not in_transaction:
                closed = await retrying(
                    lambda: off_loop(
                        history.finish,
                        fire.target,
                        fire.instant,
                        lock=lock,
                        token=ended.token,
                        state=state,
                        error=error,
                        at=ended.ended_at,
                    ),
                    deadline,
                )
                if closed:
                    return Recorded.WRITTEN
            recorded = None
            if started and in_transaction and isinstance(history, RecordReadingHistory):
                found = await retrying(
                    lambda: off_loop(history.record_of, fire.target, fire.instant, lock=lock),
                    deadline,
                )
                recorded = Recorded.ALREADY if _committed_here(found, ended) else None
            if recorded is None:
                # No start recorded, the finish refused, or the block's success not
                # committed: the whole record, or whose it is.
                recorded = await retrying(lambda: off_loop(run.write, history), deadline)
        except HistoryError as err:
            logger.warning(
                "%s: fire %s ended %s, unrecorded (retried before the next fires): %s",
                fire.target,
                fire.instant.isoformat(),
                state,
                err,
            )
            self._unrecorded.remember(run)
            return None
        if recorded is Recorded.FENCED:
            logger.warning(
                "%s: fire %s: this run's end (%s, token %s) is not recorded: a newer "
                "attempt owns the fire's record",
                fire.target,
                fire.instant.isoformat(),
                state,
                ended.token,
            )
        elif recorded is Recorded.SUCCEEDED:
            logger.warning(
                "%s: fire %s: this run's end (%s, token %s) is not recorded: an earlier "
                "attempt's success stands (its writes may have committed with it)",
                fire.target,
                fire.instant.isoformat(),
                state,
                ended.token,
            )
        elif in_transaction and recorded is Recorded.ALREADY:
            logger.debug(
                "%s: fire %s: its success committed in the task's transaction",
                fire.target,
                fire.instant.isoformat(),
            )
        elif not started:
            logger.info(
                "%s: fire %s: its run is recorded whole at its end (%s)",
                fire.target,
                fire.instant.isoformat(),
                state,
            )
        return recorded

    async def close_unrun(
        self,
        fire: Fire,
        *,
        token: int | None,
        state: RunState,
        error: str,
        start_unknown: bool = False,
    ) -> None:
        """Close the started record of `fire`, whose body never ran, as `state`;
        `start_unknown`: its start went unanswered (`UnrecordedClose`)."""
        history, lock = self._history, fire.task.lock_name
        if history is None or lock is None:
            return
        at = self._clock()
        close = UnrecordedClose(lock, fire, self._node, token, state, error, at, start_unknown)
        try:
            closed = await retrying(
                lambda: off_loop(close.write, history), time.monotonic() + FINISH_RETRY_SECONDS
            )
        except HistoryError as err:
            adopted = fire.task.overlap != Overlap.ALLOW_ALL
            logger.warning(
                "%s: fire %s: its record could not be closed as %s (%s): %s",
                fire.target,
                fire.instant.isoformat(),
                state,
                "the task's next fire adopts or expires it"
                if adopted
                else "retried before the next fires",
                err,
            )
            if not adopted:  # nothing adopts an allow_all task's records
                self._unrecorded.remember(close)
            return
        if not closed:
            logger.info(
                "%s: fire %s: its record was not closed as %s: it is finished, or a newer "
                "attempt owns it",
                fire.target,
                fire.instant.isoformat(),
                state,
            )

    async def skip(self, fire: Fire, reason: str, *, patience: float | None = None) -> None:
        """Record `fire` as skipped, retried for `patience` seconds (by default
        `SKIP_RETRY_SECONDS`), then remembered."""
        history, lock = self._history, fire.task.lock_name
        if history is None or lock is None:
            return
        skipped = UnrecordedSkip(lock, fire, self._node, reason, self._clock())
        seconds = SKIP_RETRY_SECONDS if patience is None else patience
        try:
            await retrying(lambda: off_loop(skipped.write, history), time.monotonic() + seconds)
        except HistoryError as err:
            logger.warning(
                "%s: skip of fire %s unrecorded (retried before the next fires): %s",
                fire.target,
                fire.instant.isoformat(),
                err,
            )
            self._unrecorded.remember(skipped)

    def finished_here(self, fire: Fire) -> bool:
        """Whether this node ran `fire` to its end although the history says otherwise."""
        lock = fire.task.lock_name
        return lock is not None and self._unrecorded.finished_here(lock, fire)

    async def retry_unrecorded(self, *, immediately: bool = False) -> None:
        """Write what is remembered (see `UnrecordedWrites.retry`)."""
        if len(self._unrecorded):  # the common case costs no thread hop
            await off_loop(
                self._unrecorded.retry, self._history, self._clock, immediately=immediately
            )


_T = TypeVar("_T")
#: A history write the retry loop repeats.
Write: TypeAlias = Callable[[], Awaitable[_T]]  # sync: Write: TypeAlias = Callable[[], _T]


async def retrying(write: Write[_T], deadline: float) -> _T:
    """`write()`, tried again on `HistoryError` (backing off) until `deadline` (monotonic):
    the record stage's writes outlast a history that fails for a moment."""
    pause = 0.05
    while True:
        try:
            return await write()
        except HistoryError:
            if time.monotonic() + pause > deadline:
                raise
        await asyncio.sleep(pause)
        pause = min(pause * 2, 1.0)


def _committed(fire: Fire, ended: BodyEnded) -> BodyEnded:
    """The end of a run whose success committed in the task's transaction: succeeded.

    The record says so, and the fire is done; a body that raised after its block
    (logged already) does not make it a failed fire, to retry or count as one.
    """
    if ended.verdict is Verdict.SUCCEEDED:
        return ended
    logger.warning(
        "%s: fire %s: the body ended %s after its outcome committed in its transaction; "
        "the fire stands succeeded",
        fire.target,
        fire.instant.isoformat(),
        ended.verdict.value,
    )
    return replace(ended, verdict=Verdict.SUCCEEDED, error=None)


def _committed_here(record: RunRecord | None, ended: BodyEnded) -> bool:
    """Whether `record` is the success this run's `atomic` block wrote, committed.

    Succeeded under this run's attempt and token: `record_run` would write nothing
    over it (`Recorded.ALREADY`), so the record stage need not send it. Anything
    else (still `running`, a newer attempt's) goes to `record_run`, which decides.
    """
    return (
        record is not None
        and record.state is RunState.SUCCEEDED
        and record.attempt == ended.attempt
        and record.token == ended.token
    )
