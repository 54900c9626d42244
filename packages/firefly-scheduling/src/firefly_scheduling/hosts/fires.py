"""A fire, and `execute_fire`: the single path from "a trigger fired" to the fire runner.

Every host (resident, cron-driven, library) turns a trigger into a `Fire`, the task
plus its scheduled instant in UTC, and hands it to `execute_fire`. That function is
the one seam where per-fire concerns meet: the initial-delay gate, then the
`FireRunner` (claims, the task lock, keep-alive, fencing, adoption, run history).
The instant is computed by the host, identically on every node, so that every node
names the same fire the same way.

The `FireResult` it returns carries the runner's full verdict (`FireStatus`:
succeeded, claimed elsewhere, too late, overlapping...), or the host's own reason
when the fire never reached the runner (`FireSkip`: held back, shutting down,
unavailable). `FireResult.outcome` still reads as the plain lock guard's coarse
`RunOutcome`, for callers written against `run_guarded`.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from firefly_scheduling.descriptor import ScheduledDescriptor
from firefly_scheduling.errors import FireflySchedulingError
from firefly_scheduling.fires.outcome import FireOutcome, FireStatus
from firefly_scheduling.guard import RunOutcome
from firefly_scheduling.hosts.runtime import TaskRuntime
from firefly_scheduling.instants import as_utc

logger = logging.getLogger("firefly_scheduling.hosts")

#: How the runner's verdicts read as the plain guard's `RunOutcome`; every other
#: status is "another node or an earlier run has it", which is what a lost race meant.
_RUN_OUTCOMES = {
    FireStatus.SUCCEEDED: RunOutcome.RAN,
    FireStatus.FAILED: RunOutcome.FAILED,
    FireStatus.BACKEND_ERROR: RunOutcome.SKIPPED_BACKEND_ERROR,
}


@dataclass(frozen=True)
class Fire:
    """One scheduled occurrence of a task: `(descriptor, instant)`, the instant aware UTC."""

    descriptor: ScheduledDescriptor
    instant: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "instant", as_utc(self.instant))

    @property
    def target(self) -> str:
        return self.descriptor.target


class FireSkip(enum.Enum):
    """Why a fire never reached the fire runner."""

    HELD_BACK = "held back: the initial delay has not elapsed"
    SHUTTING_DOWN = "not started: the host is shutting down"
    UNAVAILABLE = "skipped: the lock or the anchor store could not be built"


#: The most precise word on one fire: the runner's verdict, or why it never got one.
FireVerdict = FireStatus | FireSkip


class FireObserver(Protocol):
    """Told about every fire a host handled; must be quick, and should not raise."""

    def fire_finished(self, result: FireResult) -> None: ...


@dataclass(frozen=True)
class FireResult:
    """What happened to one fire on this node.

    * `verdict`: the runner's `FireStatus`, or the host's `FireSkip`.
    * `started_at`/`ended_at`: wall-clock bounds of the body, set only when it ran here.
    * `runner`: the runner's whole `FireOutcome` (attempt, fencing token, lost,
      fenced, error); None when the fire never reached the runner.
    * `adopted`: the died runs of earlier fires this fire adopted (ran again here)
      or closed as expired before running its own body, one result each.
    * `adoption`: this result is one of those, not a fire the host triggered.
    """

    fire: Fire
    node: str
    verdict: FireVerdict
    started_at: datetime | None = None
    ended_at: datetime | None = None
    runner: FireOutcome | None = None
    adopted: tuple[FireResult, ...] = ()
    adoption: bool = False

    @property
    def ran(self) -> bool:
        """Whether the body ran here for this fire (successfully or not)."""
        return self.verdict in (FireStatus.SUCCEEDED, FireStatus.FAILED)

    @property
    def outcome(self) -> RunOutcome | FireSkip:
        """The coarse outcome of the plain lock guard, for callers of `run_guarded`'s era.

        Every runner skip (claimed elsewhere, too late, overlapping...) reads as
        `SKIPPED_LOCKED`; use `verdict` to tell them apart.
        """
        if isinstance(self.verdict, FireSkip):
            return self.verdict
        return _RUN_OUTCOMES.get(self.verdict, RunOutcome.SKIPPED_LOCKED)

    def describe(self) -> str:
        """The verdict in a few words, as summaries and the demo show it ("too late")."""
        return verdict_words(self.verdict.name)


def verdict_words(name: str) -> str:
    """A verdict's name in words: `CLAIMED_ELSEWHERE` (or `claimed_elsewhere`) reads
    "claimed elsewhere". The enums' values say the same at length, for log lines."""
    return name.lower().replace("_", " ")


def execute_fire(fire: Fire, runtime: TaskRuntime) -> FireResult:
    """Run `fire` through the gate and the fire runner; never raises for a task's failure.

    Observers hear about every adopted run first, then about the fire itself. The
    whole fire (claim, task lock, body) runs inside its telemetry span.
    """
    with runtime.tracking(fire) as accepted, runtime.telemetry.fire(fire, runtime.node) as ended:
        if not accepted:
            result = FireResult(fire, runtime.node, FireSkip.SHUTTING_DOWN)
        else:
            result = _run(fire, runtime)
        ended(result)
    for finished in (*result.adopted, result):
        for observer in runtime.observers:
            try:
                observer.fire_finished(finished)
            except Exception:  # an observer must never break the host
                logger.exception("fire observer %r failed", observer)
    return result


def _run(fire: Fire, runtime: TaskRuntime) -> FireResult:
    descriptor = fire.descriptor
    try:
        # The gate (and its store) is only built for a task that has a delay.
        admitted = descriptor.initial_delay is None or runtime.gate.get().admit(descriptor)
        runner = runtime.fire_runner.get()  # builds the lock: a broken provider is UNAVAILABLE
    except FireflySchedulingError as err:
        logger.error("%s: fire of %s skipped: %s", fire.target, fire.instant.isoformat(), err)
        return FireResult(fire, runtime.node, FireSkip.UNAVAILABLE)
    if not admitted:
        return FireResult(fire, runtime.node, FireSkip.HELD_BACK)
    # One (start, end) per call of the body: the runner calls it once for each
    # adopted run that it runs again, then once for this fire, in that order.
    spans: list[tuple[datetime | None, datetime | None]] = []

    def body() -> None:
        started: datetime | None = None
        try:
            # Resolved inside the runner: an import error is logged as this task's failure.
            task = runtime.callables.resolve(descriptor.target)
            started = datetime.now(UTC)
            task()
        finally:
            spans.append((started, None if started is None else datetime.now(UTC)))

    outcome = runner.run(descriptor, fire.instant, body)
    bodies = iter(spans)

    def result_of(verdict: FireOutcome, the_fire: Fire, *, adoption: bool) -> FireResult:
        started, ended = next(bodies, (None, None)) if verdict.ran else (None, None)
        return FireResult(
            the_fire,
            runtime.node,
            verdict.status,
            started,
            ended,
            runner=verdict,
            adoption=adoption,
        )

    adopted = tuple(
        result_of(earlier, Fire(descriptor, earlier.instant), adoption=True)
        for earlier in outcome.adopted
    )
    return replace(result_of(outcome, fire, adoption=False), adopted=adopted)
