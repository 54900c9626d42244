# Generated from running_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`BodyRunner`: the run stage of a fire: its body, under a task lock it watches.

Written once, for asyncio, in `fires/running_async.py`; `fires/running.py` is
generated from it by `tools/async_to_sync.py`. The asyncio flavour awaits the body
on the caller's event loop.

A fire the start stage (`fires.starting`) hands on, its run started, runs here,
once per call to `execute`; its end goes on to the record stage
(`fires.recording`), which writes it and says what happened to the fire:

* **The lease before the body.** The task lock is checked once more: a stall since
  the acquisition (a GC pause, a slow history) may have eaten its lease, so the
  body is left a margin of it, and on a session backend the server is asked (a
  session lock ends with its session, at any moment). A lock not confirmed: the
  body is not run, and the record stage closes its started record.
* **The body**, inside `current_fire()`'s context (`fires.context`): an `Exception`
  fails the run and is logged with the task target, never propagated;
  `KeyboardInterrupt`/`SystemExit` (and a cancellation) propagate once the run's
  end is recorded.
* **The timeout.** A task with `timeout=` (the policy's `RunWithin` answer) runs
  its body within it. The asyncio flavour cancels the body at the timeout
  (`asyncio.timeout`); a cancellation from elsewhere (the host shutting down) is not
  one and propagates as before. The threaded flavour cannot stop a thread: the
  body sees `current_fire().timed_out` become True, and runs on to its end (a
  coroutine function's body there is cancelled at the timeout, by
  `hosts.runtime.task_calls`).
  Either way, a body that ran past its timeout, returned or raised, ends the run as
  `timed_out`; its task lock is kept, and renewed, until the body has returned.
  A task without `timeout=` costs no timer, thread or allocation: a few `is None`
  tests. The deadline is read from `time.monotonic()`, which no clock step moves.
* **A request to stop** (`overlap="cancel_other"`). While the body of such a task
  runs, `fires.cancel_watch` watches the backend for a newer fire waiting to replace
  it: then `current_fire().cancel_requested` becomes True, and in the asyncio
  flavour a coroutine body is cancelled (in the threaded flavour a coroutine
  function's body is, by `hosts.runtime.task_calls`). A body that ends after the
  request, however it ends, ends the run as `cancelled`.
* **Lost detection.** The lock stage renews the task lock while bodies run
  (`fires.locking`, `locks.keepalive`); a lease that lapsed, or a lock reported lost,
  while the body ran marks the run lost at its end: another node may have run
  meanwhile.

The policy (`fires.policy`) is asked just before the body (and, by the record
stage, once its end is recorded).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TypeAlias

from firefly_scheduling.fires.atomic import OutcomeSeat
from firefly_scheduling.fires.cancel_watch import CancelWatch
from firefly_scheduling.fires.context import FireContext, entered
from firefly_scheduling.fires.outcome import (
    BodyNotRun,
    Fire,
    FireResult,
    Started,
    TriggerKind,
    Verdict,
)
from firefly_scheduling.fires.overlap_names import waiting_slots
from firefly_scheduling.fires.policy import RUN, BeforeBody, BodyEnded, FirePolicy, RunWithin
from firefly_scheduling.fires.recording import RunRecorder
from firefly_scheduling.fires.run_end import written_end
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import HoldingLock, LockCapabilities
from firefly_scheduling.schedule.durations import format_duration
from firefly_scheduling.tasks.overlap import Overlap

logger = logging.getLogger("firefly_scheduling.fires")

#: A task body as the runner calls it (a coroutine function in the asyncio flavour).
Body: TypeAlias = Callable[[], object]
#: The share of its lease a body must have ahead of it when it starts; with less,
#: one renewal on the server refreshes the lease first (see `still_held`).
BODY_LEASE_MARGIN = 0.5
#: Why a fire is not run when its task lock was lost before its body could start.
LOST_BEFORE_THE_BODY = "the task lock lapsed or was lost before the body started"
#: The error of a run a newer fire asked to stop (`overlap="cancel_other"`).
CANCELLED_BY_A_NEWER_FIRE = "cancelled: a newer fire asked it to stop (overlap='cancel_other')"


class BodyRunner:
    """Runs the bodies of one runner's fires; thread-safe.

    `holdings` is the runner's lock seen through the holding port, `capabilities`
    what it declares.
    """

    def __init__(
        self,
        holdings: HoldingLock,
        capabilities: LockCapabilities,
        *,
        record: RunRecorder,
        policy: FirePolicy,
        clock: Callable[[], datetime],
        node: str,
    ) -> None:
        self._holdings = holdings
        self._renewable = capabilities.renewable
        self._session_scoped = capabilities.session_scoped
        self._record = record
        self._policy = policy
        self._clock = clock
        self._node = node

    def execute(
        self,
        fire: Fire,
        body: Body,
        *,
        started: Started,
        holding: Holding | None,
        lost: threading.Event,
        claim_seconds: float | None = None,
    ) -> FireResult:
        """Run the body once for `fire`, whose run the start stage started, and hand
        its end to the record stage.

        `holding` is the task lock's (None for an unlocked task); `lost` the event its
        keep-alive sets. `claim_seconds`: the claim's round trip, for the result. A
        `KeyboardInterrupt`, `SystemExit` or cancellation of the body propagates once
        the run's end is recorded.
        """
        token = None if holding is None else holding.fence
        interrupted: BaseException | None = None
        ended: BodyEnded | BodyNotRun
        if holding is not None and not self.still_held(holding, lost, before_body=True):
            ended = BodyNotRun(Verdict.LOCK_LOST, started.attempt, token, LOST_BEFORE_THE_BODY)
        else:
            ended, interrupted = self._run_body(fire, body, started, holding, lost)
        # An interrupted body is no run to judge: it propagates; nor is one whose
        # `atomic` block wrote its success (committed, the fire is done). The answer
        # is asked before the end is written, so the record says what comes next.
        answer = (
            self._policy.after_body(fire, ended)
            if isinstance(ended, BodyEnded) and ended.finished and not ended.in_transaction
            else RUN
        )
        end = written_end(fire, ended, answer)
        result = self._record.finish(fire, ended, end, started=started, claim_seconds=claim_seconds)
        if interrupted is not None:
            raise interrupted
        return result

    def _run_body(
        self,
        fire: Fire,
        body: Body,
        started: Started,
        holding: Holding | None,
        lost: threading.Event,
    ) -> tuple[BodyEnded, BaseException | None]:
        """How the body ended, and what interrupted it, if anything did (a
        `BaseException` that is no `Exception`: it propagates once recorded)."""
        token = None if holding is None else holding.fence
        attempt = started.attempt
        answer = self._policy.before_body(fire, BeforeBody(attempt, token))
        timeout = answer.seconds if isinstance(answer, RunWithin) else None
        history = self._record.history
        seat = None
        if history is not None and fire.task.lock_name is not None:
            seat = OutcomeSeat(history, self._clock, start_recorded=started.recorded)
        cancel = None
        if holding is not None and fire.task.overlap == Overlap.CANCEL_OTHER:
            cancel = threading.Event()
        context = FireContext(
            fire.target,
            fire.instant,
            attempt,
            token,
            self._node,
            fire.task.lock_name,
            lost,
            holding=holding,
            deadline=None if timeout is None else time.monotonic() + timeout,
            outcome=seat,
            cancel_signal=cancel,
            caught_up=fire.trigger is TriggerKind.CATCH_UP,
        )
        verdict = Verdict.FAILED
        error: str | None = "interrupted: the body did not return"
        finished = False  # returned or raised an Exception: not interrupted
        interrupted: BaseException | None = None
        started_at = self._clock()
        try:
            with entered(context):
                if cancel is not None and holding is not None:
                    self._cancellable(fire, body, timeout, holding, cancel)
                elif timeout is None:
                    body()
                else:
                    _within(body, timeout)
            verdict, error, finished = Verdict.SUCCEEDED, None, True
            if timeout is not None and context.timed_out:
                verdict, error = Verdict.TIMED_OUT, _timed_out(fire, timeout, attempt, None)
        except Exception as err:
            finished = True
            error = f"{type(err).__name__}: {err}"
            if timeout is not None and context.timed_out:
                # A TimeoutError is the bound's own cancellation (or as good as one).
                raised = None if isinstance(err, TimeoutError) else error
                verdict, error = Verdict.TIMED_OUT, _timed_out(fire, timeout, attempt, raised)
            else:
                logger.exception(
                    "%s: the task raised (fire %s, attempt %d)",
                    fire.target,
                    fire.instant.isoformat(),
                    attempt,
                )
        except BaseException as err:  # noqa: BLE001 - interrupted: recorded, then raised again
            interrupted = err
        ended_at = self._clock()
        if finished and cancel is not None and cancel.is_set():
            verdict = Verdict.CANCELLED
            error = (
                CANCELLED_BY_A_NEWER_FIRE
                if error is None
                else f"{CANCELLED_BY_A_NEWER_FIRE}; then: {error}"
            )
        if holding is not None and not lost.is_set() and (holding.lost or holding.lapsed()):
            lost.set()
            logger.error(
                "%s: fire %s: the task lock %r lapsed or was lost while the body ran; "
                "another node may have run meanwhile",
                fire.target,
                fire.instant.isoformat(),
                holding.name,
            )
        ended = BodyEnded(
            verdict,
            attempt,
            token,
            error,
            started_at,
            ended_at,
            lost.is_set(),
            finished,
            in_transaction=seat is not None and seat.written,
        )
        return ended, interrupted

    def _cancellable(
        self,
        fire: Fire,
        body: Body,
        timeout: float | None,
        holding: Holding,
        cancel: threading.Event,
    ) -> None:
        """Run `body` (within `timeout`) while the backend is watched for a newer fire
        asking this run to stop; a coroutine body is cancelled then (asyncio flavour).

        Returns normally when the request cancelled it; a cancellation of this fire
        from elsewhere (the host) propagates.
        """
        [slot] = waiting_slots(holding.name, 1)
        label = f"{fire.target} @ {fire.instant.isoformat()}"
        interval = holding.ttl_seconds / 3
        watch = CancelWatch(
            self._holdings, slot, interval=interval, requested=cancel, label=label
        ).start()
        try:
            _bounded(body, timeout)
        finally:
            watch.stop()

    def still_held(
        self, holding: Holding, lost: threading.Event, *, before_body: bool = False
    ) -> bool:
        """Whether the task lock may still be trusted; checked just before a body starts.

        A stall between the acquisition and the body (a GC pause, SIGSTOP, a starved
        process, a saturated pool, a slow history) eats the lease unnoticed by the
        keep-alive, which may not have run yet. No check closes the gap between itself
        and the body's first statement, so the body is left a margin: with less than
        `BODY_LEASE_MARGIN` of the lease ahead by the local clock, one renewal on the
        server decides. It succeeds only while the server still holds the lease (the
        local expiry is taken before each round trip, so it comes first) and refreshes
        it to a whole TTL; once the server freed it, another node may run the fire, and
        it is skipped here. A renewal that fails for an error cannot confirm the lease
        either: the fire is skipped rather than run on a lease nobody vouched for.

        The chaos checker found one fire run twice on a loaded machine, explained by a
        node that passed this check with little lease left, stalled, and ran the body
        after another node had taken the expired lease and run the same fire.
        """
        if holding.lost:
            lost.set()
        if lost.is_set():
            return False
        if self._lease_ahead(holding, before_body=before_body):
            return True
        lost.set()
        logger.error(
            "the task lock %r lapsed or could not be confirmed before the body could "
            "start (the node stalled for most of its lease)",
            holding.name,
        )
        return False

    def _lease_ahead(self, holding: Holding, *, before_body: bool) -> bool:
        """Whether the body has its margin of lease ahead, renewing once when short.

        A renewal vouches for the lease from when it was sent (the local expiry is
        taken before the round trip), so a reply that came late may leave less than
        the margin, or nothing: the server may have freed the lease before the reply
        arrived, and another node taken it. The margin is checked again after it.
        """
        margin = holding.ttl_seconds * BODY_LEASE_MARGIN
        ask_the_session = before_body and self._session_scoped
        if holding.remaining() >= margin and not ask_the_session:
            return True
        if self._renewable:
            # A session lock has no lease to count on: it ends with its session, at any
            # moment, and only the server knows (the chaos checker, seed 120401 on
            # MySQL: a connection reset between the acquisition and the body freed the
            # lock, another node took it, and the body ran anyway). Its renewal asks,
            # once, just before the body (the earlier checks count on the lease).
            renewed = self._holdings.renew_holding(holding, holding.ttl_seconds)
            return renewed and holding.remaining() >= margin
        return not holding.lapsed()  # nothing can refresh it: what is left is all there is


def _bounded(body: Body, seconds: float | None) -> None:
    """Run `body`, within `seconds` when there is a bound (see `_within`)."""
    if seconds is None:
        body()
    else:
        _within(body, seconds)


def _within(body: Body, seconds: float) -> None:
    """Run `body`, cancelled after `seconds` in the asyncio flavour.

    Only this bound's own cancellation becomes a `TimeoutError` here (the caller then
    finds the fire's deadline passed); the host's cancellation stays a cancellation.
    A thread cannot be cancelled: the threaded flavour just runs the body, which
    watches `current_fire().timed_out`.
    """
    body()


def _timed_out(fire: Fire, seconds: float, attempt: int, raised: str | None) -> str:
    """The run's error text when its body ran past its timeout, logged as it is made."""
    error = f"timed out after {_readable(seconds)}"
    if raised is not None:
        error = f"{error}; then: {raised}"
    logger.error(
        "%s: the body ran past its timeout (fire %s, attempt %d): %s",
        fire.target,
        fire.instant.isoformat(),
        attempt,
        error,
    )
    return error


def _readable(seconds: float) -> str:
    """`200ms`, `10m`: the timeout as `@scheduled` reads it, or in seconds where it cannot."""
    try:
        return format_duration(seconds)
    except ValueError:
        return f"{seconds:g}s"
