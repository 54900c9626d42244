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
* `when_held`: locking, the task lock held by an earlier run. `Skip` (overlapping).
  Next: the overlap policies buffer_one, buffer_all, cancel_other, allow_all.
* `before_body`: running, the lock confirmed, just before the body. `Run`, or
  `RunWithin` (the task's `timeout=`: the body is bounded, see `fires.running`).
* `after_body`: recording, once the end of a body that finished (returned or raised)
  is recorded. `Run` (the run stands).
  Next: retries (run again later, attempt k of n).
* `at_record`: recording, just before the run's end is written; told, not asked.
  Next: the outcome committed inside the task's own transaction.

`DefaultPolicy` is today's behaviour: every fire runs, within its task's `timeout=`
when it has one, and a fire whose task lock is held is skipped as overlapping. A
policy is asked on every fire, from several threads at once: it keeps no per-fire
state, and what it needs from a server (pause's control store) is read by the stage
with its own round trip (the claim), never by the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol

from firefly_scheduling.fires.catching_up import NO_CATCHUP_WINDOW, without_window
from firefly_scheduling.fires.outcome import Fire, Verdict


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


#: The one `Run` answer.
RUN: Final = Run()


@dataclass(frozen=True, slots=True)
class BeforeClaim:
    """What deciding knows before it claims a fire: how late it is, within grace."""

    #: Seconds past the fire's `due` time (its instant, plus its jitter offset) by
    #: this node's clock (negative: early).
    late_seconds: float


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
    `lost`: the task lock was reported lost, or lapsed, while it ran.
    """

    verdict: Verdict
    attempt: int
    token: int | None
    error: str | None
    started_at: datetime
    ended_at: datetime
    lost: bool
    finished: bool


class FirePolicy(Protocol):
    """What the stages ask about a fire; see the module doc for each point."""

    def before_claim(self, fire: Fire, facts: BeforeClaim) -> Run | Skip:
        """Claim the fire (`Run`), or skip it before anything is taken."""
        ...

    def when_held(self, fire: Fire, facts: LockHeld) -> Skip:
        """The task lock is held by another run: how the fire is skipped."""
        ...

    def before_body(self, fire: Fire, facts: BeforeBody) -> Run | RunWithin:
        """The body is about to run under a confirmed lock: unbounded, or within a time."""
        ...

    def after_body(self, fire: Fire, facts: BodyEnded) -> Run:
        """The body ended and its end is recorded: the run stands."""
        ...

    def at_record(self, fire: Fire, facts: BodyEnded) -> None:
        """The run's end is about to be written to the run history."""
        ...


class DefaultPolicy:
    """Today's behaviour: run every fire; skip one whose task lock is held, as overlapping."""

    def before_claim(self, fire: Fire, facts: BeforeClaim) -> Run | Skip:
        if without_window(fire):
            return Skip(Verdict.TOO_LATE, NO_CATCHUP_WINDOW)
        return RUN

    def when_held(self, fire: Fire, facts: LockHeld) -> Skip:
        return Skip(Verdict.OVERLAPPING, facts.why)

    def before_body(self, fire: Fire, facts: BeforeBody) -> Run | RunWithin:
        timeout = fire.task.timeout
        return RUN if timeout is None else RunWithin(timeout)

    def after_body(self, fire: Fire, facts: BodyEnded) -> Run:
        return RUN

    def at_record(self, fire: Fire, facts: BodyEnded) -> None:
        return None


#: The policy a runner asks when it is given none.
DEFAULT_POLICY: Final = DefaultPolicy()
