"""The policy seam: where a stage of the fire path asks what to do with a fire.

A policy is a small object the stages ask, at fixed points, with the fire and the
facts the asking stage knows; it answers, and the stage acts. It never reaches into a
stage: it sees a `Fire` and a frozen facts value, nothing it could change. The
answers are `Run` (go on as planned) and `Skip` (run nothing: the fire is recorded as
skipped, with the reason, and ends with the verdict). Each point's return type is
the set of answers its stage acts on today; a coming policy widens it where it plugs
in, so the type checker names every stage that has to learn the new answer.

The points, the stage that asks and when, what it acts on today, and what plugs in:

* `before_claim`: deciding, within grace, before the claim (or the task lock, or
  the body, where the fire has none). `Run` or `Skip`. Next: pause (its control
  store read with the claim, on the backend). Catch-up (fires missed while the
  fleet was down, `fires.catching_up`): grace does not skip a catch-up fire within
  its task's window, and a catch-up fire of a task without one is skipped. Jitter is
  no policy: a fire's `due` time carries it, and `late_seconds` counts from there.
* `before_start`: starting, the claim won and the task lock held, just before the
  run's start is written and its body runs. `Run` or `Skip`. The stage reads the
  control store's pauses first, one round trip (`fires.pausing`), and hands them
  over as facts: a paused fire is skipped ("paused"), a fire whose pauses could not
  be read is skipped too (fail closed), and an operator's manual fire runs anyway.
* `when_held`: locking, the task lock held by an earlier run. `Skip` (overlapping),
  `RunAlongside` (the task's `overlap="allow_all"`: run without the task lock) or
  `WaitTurn` (`overlap="buffer_one"`, `"buffer_all"` or `"cancel_other"`: wait for
  the lock in one of the task's waiting slots; see `fires.overlap_wait`; under
  `cancel_other` the slot held is the request to stop, `fires.cancel_watch`).
* `before_body`: running, the lock confirmed, just before the body. `Run`, or
  `RunWithin` (the task's `timeout=`: the body is bounded, see `fires.running`).
* `after_body`: recording, when a body finished (returned or raised), just before its
  end is written (so the record says what comes next). `Run` (the run stands),
  `RunAgain` (the task's `retries=`: retry k of n, due at a time, `fires.retries`),
  or `Skip` (the retry that was due is skipped: its reason goes into the record).
* `at_record`: recording, just before the run's end is written. None (write it),
  or `InTransaction`: the body's `current_fire().atomic(...)` block wrote the
  success through its own connection (`fires.atomic`), so the end is checked, not
  written again.

`DefaultPolicy` is today's behaviour: every fire runs, within its task's `timeout=`
when it has one, a fire whose task lock is held is skipped as overlapping, or run
alongside or buffered as its task's `overlap=` says, and a failed fire of a task
with `retries=` is run again (`fires.retry_policy`), and a fire of a paused task is
skipped, unless an operator asked for it (`MANUAL`). A policy is asked on every
fire, from several threads at once: it keeps no per-fire state, and what it needs
from a server (pause's control store) is read by the stage with its own round trip,
never by the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from firefly_scheduling.control.records import Pause
from firefly_scheduling.fires.catching_up import NO_CATCHUP_WINDOW, without_window
from firefly_scheduling.fires.outcome import Fire, TriggerKind, Verdict
from firefly_scheduling.fires.overlap_names import previous_instant, queue_marker, waiting_slots
from firefly_scheduling.fires.retries import RetryOf, RetrySkipped
from firefly_scheduling.fires.retry_policy import next_retry
from firefly_scheduling.tasks.descriptor import DEFAULT_LOCK_TTL_SECONDS
from firefly_scheduling.tasks.overlap import BUFFER_ALL_MAX_WAITING, Overlap


@dataclass(frozen=True, slots=True)
class Run:
    """Go on with the fire as planned: claim it, run its body, keep its run as it ended."""


@dataclass(frozen=True, slots=True)
class Skip:
    """Run nothing: the fire is recorded as skipped with `reason` and ends as `verdict`."""

    verdict: Verdict
    reason: str


@dataclass(frozen=True, slots=True)
class RunWithin:
    """Run the body, bounded: past `seconds` it times out (`fires.running` says how)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class RunAgain:
    """Run the fire again later: `retry` says which retry, of how many, and when it is
    due (`fires.retries`). The run that ended stands as recorded."""

    retry: RetryOf


#: The one `Run` answer.
RUN: Final = Run()


@dataclass(frozen=True, slots=True)
class InTransaction:
    """The run's success was written in the task's own transaction (`fires.atomic`):
    the record stage reads whether it committed instead of writing the end."""


#: The one `InTransaction` answer.
IN_TRANSACTION: Final = InTransaction()


@dataclass(frozen=True, slots=True)
class RunAlongside:
    """Run the body although the task lock is held: without it (no token, no keep-alive).

    The fire's claim still makes it run once in the fleet; the task lock serialises
    nothing for this fire (`overlap="allow_all"`).
    """


@dataclass(frozen=True, slots=True)
class WaitTurn:
    """Wait for the task lock, holding one of the waiting `slots` meanwhile.

    A fire that finds every slot taken is skipped as overlapping, with `full` as the
    reason. With a `marker` (`buffer_all`), the fire holds it while it waits, and
    first waits for the fire before it to stop holding its own (`after`), so fires
    take the lock oldest first (`fires.overlap_wait`).
    """

    slots: tuple[str, ...]
    full: str
    marker: str | None = None
    after: str | None = None
    #: Seconds a fire may wait for a slot before it finds them full: a slot is also
    #: tried, briefly, by the run it asks to stop (`cancel_other`).
    patience: float = 0.0


#: The one `RunAlongside` answer.
RUN_ALONGSIDE: Final = RunAlongside()


@dataclass(frozen=True, slots=True)
class BeforeClaim:
    """What deciding knows before it claims a fire: how late it is, within grace."""

    #: Seconds past the fire's `due` time (its instant, plus its jitter offset) by
    #: this node's clock (negative: early).
    late_seconds: float


@dataclass(frozen=True, slots=True)
class BeforeStart:
    """What starting knows before the run starts: the pause that holds the task, if any.

    `pause` is the fleet-wide pause, else the task's own, else None; `unknown` says
    why the pauses could not be read (the control store failed), else None. Both
    None where the host has no control store.
    """

    pause: Pause | None = None
    unknown: str | None = None
    #: The lifted pause whose stretch holds the fire's instant (resume is from now).
    lifted: Pause | None = None


#: The facts of a fire where nothing is paused (or no control store is configured).
NOT_PAUSED: Final = BeforeStart()


@dataclass(frozen=True, slots=True)
class LockHeld:
    """What deciding knows when the task lock is held: by whom, as far as it can tell."""

    lock_name: str
    #: In words for the log and the history (`fires.locking`).
    why: str


@dataclass(frozen=True, slots=True)
class BeforeBody:
    """What running knows just before the body: the attempt and the lock's token."""

    attempt: int
    token: int | None


@dataclass(frozen=True, slots=True)
class BodyEnded:
    """How the body ended, as running saw it; what recording writes and the result says.

    `finished`: the body returned or raised an `Exception` (not interrupted);
    `lost`: the task lock was reported lost, or lapsed, while it ran;
    `in_transaction`: its `current_fire().atomic(...)` block wrote the run's success
    in the task's own transaction (whether that committed, the history says).
    """

    verdict: Verdict
    attempt: int
    token: int | None
    error: str | None
    started_at: datetime
    ended_at: datetime
    lost: bool
    finished: bool
    in_transaction: bool = False


class FirePolicy(Protocol):
    """What the stages ask about a fire; see the module doc for each point."""

    def before_claim(self, fire: Fire, facts: BeforeClaim) -> Run | Skip:
        """Claim the fire (`Run`), or skip it before anything is taken."""
        ...

    def before_start(self, fire: Fire, facts: BeforeStart) -> Run | Skip:
        """The fire is won and locked, its run about to start: start it, or skip it."""
        ...

    def when_held(self, fire: Fire, facts: LockHeld) -> Skip | RunAlongside | WaitTurn:
        """The task lock is held by another run: skip the fire, run it alongside, or wait."""
        ...

    def before_body(self, fire: Fire, facts: BeforeBody) -> Run | RunWithin:
        """The body is about to run under a confirmed lock: unbounded, or within a time."""
        ...

    def after_body(self, fire: Fire, facts: BodyEnded) -> Run | RunAgain | Skip:
        """The body ended: the run stands, the fire runs again, or its retry is skipped."""
        ...

    def at_record(self, fire: Fire, facts: BodyEnded) -> InTransaction | None:
        """The run's end is about to be written to the run history: write it (None),
        or only check it, written in the task's transaction (`InTransaction`)."""
        ...


class DefaultPolicy:
    """Today's behaviour: run every fire; one whose task lock is held as its task's
    `overlap=` says (by default skipped, as overlapping); a failed fire again as its
    task's `retries=` says."""

    def before_claim(self, fire: Fire, facts: BeforeClaim) -> Run | Skip:
        if without_window(fire):
            return Skip(Verdict.TOO_LATE, NO_CATCHUP_WINDOW)
        return RUN

    def before_start(self, fire: Fire, facts: BeforeStart) -> Run | Skip:
        return pause_answer(fire, facts)

    def when_held(self, fire: Fire, facts: LockHeld) -> Skip | RunAlongside | WaitTurn:
        return overlap_answer(fire, facts.why)

    def before_body(self, fire: Fire, facts: BeforeBody) -> Run | RunWithin:
        timeout = fire.task.timeout
        return RUN if timeout is None else RunWithin(timeout)

    def after_body(self, fire: Fire, facts: BodyEnded) -> Run | RunAgain | Skip:
        if not fire.task.retries:  # a task without retries costs one test
            return RUN
        if facts.lost:
            # Its task lock lapsed while it ran: another node may have adopted the fire
            # and run it meanwhile, and a retry would run it once more.
            return RUN
        retry = next_retry(fire, facts.verdict, attempt=facts.attempt, ended_at=facts.ended_at)
        if isinstance(retry, RetrySkipped):
            return Skip(Verdict.OVERLAPPING, retry.reason)
        return RUN if retry is None else RunAgain(retry)

    def at_record(self, fire: Fire, facts: BodyEnded) -> InTransaction | None:
        return IN_TRANSACTION if facts.in_transaction else None


#: The policy a runner asks when it is given none.
DEFAULT_POLICY: Final = DefaultPolicy()


def pause_answer(fire: Fire, facts: BeforeStart) -> Run | Skip:
    """Whether `fire` starts, given the pause that holds its task (`facts`).

    A manual fire (an operator's `trigger`) runs while its task is paused: the
    operator asked for it. Every other fire of a paused task is skipped, reason
    `PAUSED`. Pauses that could not be read skip the fire too: a pause must hold
    even while its store is failing, so the fleet fails closed, and says why.
    After a resume, a fire of the schedule due inside the lifted stretch is skipped
    as well, however late it starts; a backfill or retry of it is an explicit replay.
    """
    if fire.trigger is TriggerKind.MANUAL or facts is NOT_PAUSED:
        return RUN
    if facts.unknown is not None:
        return Skip(Verdict.BACKEND_ERROR, f"{PAUSE_UNKNOWN}: {facts.unknown}")
    if facts.pause is not None:
        return Skip(Verdict.PAUSED, PAUSED)
    if facts.lifted is not None and fire.trigger in _SCHEDULE_KINDS:
        return Skip(Verdict.PAUSED, PAUSED)
    return RUN


#: The fires a schedule names itself; a lifted pause's stretch skips these only.
_SCHEDULE_KINDS: Final = frozenset(
    {TriggerKind.SCHEDULED, TriggerKind.RUNTIME, TriggerKind.CATCH_UP}
)


#: The reason of a fire skipped because its task (or the whole fleet) is paused.
PAUSED: Final = "paused"
#: The start of the reason of a fire skipped because the pauses could not be read.
PAUSE_UNKNOWN: Final = "not started: whether its task is paused is unknown (fail closed)"


def overlap_answer(fire: Fire, why: str) -> Skip | RunAlongside | WaitTurn:
    """What `fire`'s task's `overlap=` says of a fire whose task lock is held (`why`)."""
    overlap = fire.task.overlap
    if overlap == Overlap.ALLOW_ALL:
        return RUN_ALONGSIDE
    lock = fire.task.lock_name or fire.target
    if overlap == Overlap.BUFFER_ONE:
        return WaitTurn(waiting_slots(lock, 1), ANOTHER_FIRE_WAITS)
    if overlap == Overlap.BUFFER_ALL:
        return WaitTurn(
            waiting_slots(lock, BUFFER_ALL_MAX_WAITING),
            QUEUE_FULL,
            marker=queue_marker(lock, fire.instant),
            after=queue_marker(lock, previous_instant(fire)),
        )
    if overlap == Overlap.CANCEL_OTHER:
        ttl = fire.task.lock_ttl or DEFAULT_LOCK_TTL_SECONDS
        return WaitTurn(waiting_slots(lock, 1), ANOTHER_FIRE_REPLACES, patience=ttl)
    return Skip(Verdict.OVERLAPPING, why)


#: Why a fire of a `cancel_other` task is skipped when another fire waits to replace
#: the run already.
ANOTHER_FIRE_REPLACES = (
    "another fire of the task already waits for the run it asked to stop (overlap='cancel_other')"
)
#: Why a fire of a `buffer_one` task is skipped when another fire waits already.
ANOTHER_FIRE_WAITS = "another fire of the task is already buffered (overlap='buffer_one')"
#: Why a fire of a `buffer_all` task is skipped when its queue is full.
QUEUE_FULL = (
    f"{BUFFER_ALL_MAX_WAITING} fires of the task are already buffered, the most "
    "overlap='buffer_all' keeps waiting"
)
