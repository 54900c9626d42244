# Generated from starting_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`RunStarter`: the start stage of a fire: its run started in the history.

Written once, for asyncio, in `fires/starting_async.py`; `fires/starting.py` is
generated from it by `tools/async_to_sync.py`. The asyncio flavour calls the
(synchronous) run history in a worker thread (`off_loop`, `fires.history_calls`).

The locked-run stage (`fires.locked_run`) hands a fire here, under its task lock;
this stage writes the run's start and hands the fire on to the run stage
(`fires.running`) with the attempt the history gave it:

* **Paused first.** With a control store, the pauses are read (`fires.pausing`,
  one round trip; one per batch of fires whose task locks were taken with their
  claims), and the policy asked (`FirePolicy.before_start`): a skipped fire is
  recorded with its reason (`paused`), its start never written, its body never run.
* **A refused start is not run.** The history refuses a start where the fire is
  finished, or owned by a newer attempt (its record's token): the fire ends as
  `already recorded`.
* **A failed start still runs.** A history that fails or times out never stops a
  run: the body is told the attempt it would have had, and the record stage writes
  the whole record at its end. Its claim (`fires.claims`) is what keeps it once.
* **Except an adoption's.** An adoption takes no claim: the died run's record, taken
  over under the newer token, is all that tells another node the fire is run again.
  Unrecorded, a node that later finds that record still `running` would adopt the
  fire once more, and run it a second time. So an adoption whose start fails is not
  run (`BACKEND_ERROR`): the record stays `running`, and the task's next fire adopts
  it, or closes it as expired past grace.
* **A retry takes its fire's record over.** A retry (`fires.retries`) starts on the
  record its failed attempt left (`RetryStartingHistory.start_retry`), as the next
  attempt; refused (another node started this retry, or the record moved on), it is
  not run; nor when that start fails (`BACKEND_ERROR`): its claim keeps other retries
  out, not an adoption of the fire's record. A history that cannot start retries
  runs it with its start unrecorded.
* **Starts taken with claims.** A host that claims fires together starts their runs
  with the claims, in one request where the history takes batches (`starts_ahead`);
  such a fire comes here already started.

Only a locked task's fires are recorded (the lock name is half of a record's key);
for any other fire, and without a history, nothing is written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from firefly_scheduling.fires.history_calls import off_loop
from firefly_scheduling.fires.outcome import (
    FIRST_ATTEMPT,
    UNRECORDED,
    Fire,
    FireResult,
    Started,
    TaskLockAhead,
    Verdict,
)
from firefly_scheduling.fires.policy import NOT_PAUSED, FirePolicy, Skip
from firefly_scheduling.fires.retries import RetryOf
from firefly_scheduling.history.port import (
    BatchStartingHistory,
    HistoryError,
    NewRun,
    RetryStartingHistory,
    RunHistory,
)
from firefly_scheduling.locks.holding import Holding

if TYPE_CHECKING:
    from firefly_scheduling.fires.pausing import PauseReader
    from firefly_scheduling.fires.recording import RunRecorder
    from firefly_scheduling.fires.running import Body, BodyRunner

logger = logging.getLogger("firefly_scheduling.fires")


@dataclass(frozen=True, slots=True)
class Unstarted:
    """A start that failed where the run may not go unrecorded (an adoption, a
    retry): why."""

    reason: str


class RunStarter:
    """The start stage of one runner; thread-safe. Without a history, starts nothing.

    Started runs go on to `body_runner`; `clock` is the runner's wall clock (aware
    UTC), the start's time; results carry `node`. `pauses` reads the control store
    (None: no store, nothing is paused); `policy` decides with what it read, and
    skips are written through `record`.
    """

    def __init__(
        self,
        body_runner: BodyRunner,
        history: RunHistory | None,
        *,
        record: RunRecorder,
        policy: FirePolicy,
        pauses: PauseReader | None,
        clock: Callable[[], datetime],
        node: str,
    ) -> None:
        self._body = body_runner
        self._history = history
        self._record = record
        self._policy = policy
        self._pauses = pauses
        self._clock = clock
        self._node = node
        store: object = history  # mypy does not intersect two protocols
        self._batch_starts = store if isinstance(store, BatchStartingHistory) else None
        self._retry_starts = store if isinstance(store, RetryStartingHistory) else None

    def start_then_run(
        self,
        fire: Fire,
        body: Body,
        *,
        holding: Holding | None,
        lost: threading.Event,
        started_ahead: bool = False,
        adopting: int | None = None,
        claim_seconds: float | None = None,
        pause_checked: bool = False,
    ) -> FireResult:
        """Start the run of `fire` in the history, then hand it to the run stage.

        `holding` is the task lock's (None for an unlocked task); `lost` the event its
        keep-alive sets. `started_ahead`: the history has this run started, attempt
        1, with its claim. `adopting`: the attempt of the died run this run adopts, whose
        start must be recorded for it to run.
        `claim_seconds`: the claim's round trip, for the result. `pause_checked`:
        the batch of its claim read the pauses already (`starts_ahead`).
        """
        token = None if holding is None else holding.fence
        started = FIRST_ATTEMPT
        if not started_ahead:
            # Its batch may have read the pauses (`pause_checked`), and still left its
            # start to this worker: the start is written before the body all the same.
            [skip] = [None] if pause_checked else self._skips([fire])
            if skip is not None:
                self._record.skip(fire, skip.reason)
                return FireResult(
                    fire,
                    self._node,
                    skip.verdict,
                    token=token,
                    error=skip.reason,
                    claim_seconds=claim_seconds,
                )
            maybe = self._start(fire, token=token, adopting=adopting)
            if isinstance(maybe, Unstarted):
                return FireResult(
                    fire,
                    self._node,
                    Verdict.BACKEND_ERROR,
                    token=token,
                    error=maybe.reason,
                    claim_seconds=claim_seconds,
                )
            if maybe is None:
                return FireResult(
                    fire,
                    self._node,
                    Verdict.ALREADY_RECORDED,
                    token=token,
                    claim_seconds=claim_seconds,
                )
            started = maybe
        return self._body.execute(
            fire, body, started=started, holding=holding, lost=lost, claim_seconds=claim_seconds
        )

    def _start(
        self, fire: Fire, *, token: int | None, adopting: int | None
    ) -> Started | Unstarted | None:
        """Record the run of `fire` as started: its attempt, or None when the history
        refuses it (the fire is finished, or a newer attempt owns it: not run), or
        `Unstarted` for an adoption (of attempt `adopting`) or a retry it could not
        record."""
        history, lock = self._history, fire.task.lock_name
        if history is None or lock is None:
            # Nothing recorded: a retry is still the attempt after the one it follows.
            retry = fire.retry
            return UNRECORDED if retry is None else Started(retry.after_attempt + 1, False)
        if fire.retry is not None:
            return self._start_retry(fire, fire.retry, token=token, lock=lock)
        try:
            attempt = off_loop(
                history.start,
                fire.target,
                fire.instant,
                lock=lock,
                node=self._node,
                token=token,
                at=self._clock(),
                trigger=fire.recorded_trigger,
                requested_by=fire.asked_by,
            )
        except HistoryError as err:
            if adopting is not None:
                reason = (
                    f"not adopted: the run history could not record attempt {adopting + 1} "
                    f"(the task's next fire adopts it): {err}"
                )
                logger.warning("%s: fire %s %s", fire.target, fire.instant.isoformat(), reason)
                return Unstarted(reason)
            logger.warning(
                "%s: fire %s runs unrecorded (recorded whole at its end): %s",
                fire.target,
                fire.instant.isoformat(),
                err,
            )
            return UNRECORDED
        if attempt is None:
            logger.info(
                "%s: fire %s not run: the history has it finished or owned by a newer attempt",
                fire.target,
                fire.instant.isoformat(),
            )
            return None
        return FIRST_ATTEMPT if attempt == 1 else Started(attempt, recorded=True)

    def _start_retry(
        self, fire: Fire, retry: RetryOf, *, token: int | None, lock: str
    ) -> Started | Unstarted | None:
        """Start `retry` (`fire.retry`) on its fire's failed record: its attempt, or None
        (not run: the record moved on), or `Unstarted` when the history failed."""
        unrecorded = Started(retry.after_attempt + 1, recorded=False)
        history = self._retry_starts
        if history is None:
            return unrecorded
        try:
            attempt = off_loop(
                history.start_retry,
                fire.target,
                fire.instant,
                lock=lock,
                node=self._node,
                token=token,
                after_attempt=retry.after_attempt,
                note=str(retry),
                at=self._clock(),
            )
        except HistoryError as err:
            reason = (
                f"{retry} not run: the run history could not record attempt "
                f"{retry.after_attempt + 1}: {err}"
            )
            logger.warning("%s: fire %s, %s", fire.target, fire.instant.isoformat(), reason)
            return Unstarted(reason)
        if attempt is None:
            logger.info(
                "%s: fire %s, %s not run: its record is no longer attempt %d failed",
                fire.target,
                fire.instant.isoformat(),
                retry,
                retry.after_attempt,
            )
            return None
        return Started(attempt, recorded=True)

    def _skips(self, fires: Sequence[Fire]) -> list[Skip | None]:
        """The policy's skip of each of `fires`, with the pauses read in one round trip
        (none without a control store); None for a fire that starts."""
        reader = self._pauses
        facts = [NOT_PAUSED for _ in fires] if reader is None else reader.facts(fires)
        answers = [self._policy.before_start(f, fact) for f, fact in zip(fires, facts, strict=True)]
        for fire, answer in zip(fires, answers, strict=True):
            if isinstance(answer, Skip):
                logger.info(
                    "%s: fire %s not started: %s",
                    fire.target,
                    fire.instant.isoformat(),
                    answer.reason,
                )
        return [answer if isinstance(answer, Skip) else None for answer in answers]

    def starts_ahead(
        self, fires: Sequence[Fire], ahead: dict[int, TaskLockAhead]
    ) -> dict[int, TaskLockAhead]:
        """`ahead` (task locks taken with a batch of claims, by index into `fires`) with
        the runs of the fires whose locks it holds started, where the history starts new
        runs in one round trip (`BatchStartingHistory`).

        The fires' workers would otherwise each read the task's running records and
        write their start, two blocking round trips before the body. A fire this
        cannot start (one to adopt or expire first, one recorded already) is left to
        its worker, as is every fire when the history fails here: its worker meets
        the failure again, and logs it.
        """
        held = {
            index: lock.answer for index, lock in ahead.items() if isinstance(lock.answer, Holding)
        }
        if not held:
            return ahead
        checked = self._pauses is not None
        if checked:  # one read for the batch; a worker reads no more
            # A fire to skip is left to its worker, which reads its pause again, and skips it.
            skips = self._skips([fires[index] for index in held])
            held = {i: h for (i, h), skip in zip(held.items(), skips, strict=True) if not skip}
        history = self._batch_starts
        started: Sequence[bool] = ()
        if history is not None and held:
            runs = [
                NewRun(holding.name, fires[index].target, fires[index].instant, holding.fence)
                for index, holding in held.items()
            ]
            try:
                started = off_loop(history.start_new_many, runs, node=self._node, at=self._clock())
            except HistoryError as err:
                logger.info("the runs of %d fires are left to their workers: %s", len(runs), err)
                started = ()
        if not (checked or started):
            return ahead
        # Each fire's answer built once (a `dataclasses.replace` per fire and flag cost
        # a few microseconds each on the claimer's thread).
        begun = dict(ahead)
        for index, new in zip(held, started or [False] * len(held), strict=True):
            lock = ahead[index]
            begun[index] = TaskLockAhead(
                held[index],
                started=new or lock.started,
                pause_checked=checked or lock.pause_checked,
            )
        return begun
