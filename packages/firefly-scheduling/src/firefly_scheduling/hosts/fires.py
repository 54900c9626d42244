"""A fire, and `execute_fire`: the single path from "a trigger fired" to the lock guard.

Every host (resident, cron-driven, library) turns a trigger into a `Fire`, the task
plus its scheduled instant in UTC, and hands it to `execute_fire`. That function is
the one seam where per-fire concerns belong: the initial-delay gate now, and fire
claims and run history later (they need the instant, which is why it is computed
by the host, identically on every node, and carried here).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from firefly_scheduling.descriptor import ScheduledDescriptor
from firefly_scheduling.errors import FireflySchedulingError
from firefly_scheduling.fires.outcome import FireStatus
from firefly_scheduling.guard import RunOutcome
from firefly_scheduling.hosts.runtime import TaskRuntime
from firefly_scheduling.instants import as_utc

logger = logging.getLogger("firefly_scheduling.hosts")

#: How the fire runner's verdicts read in a host's result; every other status is
#: "another node or an earlier run has it", which is what a lost lock race meant.
_OUTCOMES = {
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
    """Why a fire did not reach the lock guard."""

    HELD_BACK = "held back: the initial delay has not elapsed"
    SHUTTING_DOWN = "not started: the host is shutting down"
    UNAVAILABLE = "skipped: the lock or the anchor store could not be built"


class FireObserver(Protocol):
    """Told about every fire a host handled; must be quick, and should not raise."""

    def fire_finished(self, result: FireResult) -> None: ...


@dataclass(frozen=True)
class FireResult:
    """What happened to one fire on this node.

    `started_at`/`ended_at` are the wall-clock bounds of the body, set only when it ran.
    """

    fire: Fire
    node: str
    outcome: RunOutcome | FireSkip
    started_at: datetime | None = None
    ended_at: datetime | None = None

    @property
    def ran(self) -> bool:
        """Whether the body ran here (successfully or not)."""
        return self.outcome in (RunOutcome.RAN, RunOutcome.FAILED)


def execute_fire(fire: Fire, runtime: TaskRuntime) -> FireResult:
    """Run `fire` through the gate and the lock guard; never raises for a task's failure."""
    with runtime.tracking(fire) as accepted:
        if not accepted:
            result = FireResult(fire, runtime.node, FireSkip.SHUTTING_DOWN)
        else:
            result = _guarded(fire, runtime)
    for observer in runtime.observers:
        try:
            observer.fire_finished(result)
        except Exception:  # an observer must never break the host
            logger.exception("fire observer %r failed", observer)
    return result


def _guarded(fire: Fire, runtime: TaskRuntime) -> FireResult:
    descriptor = fire.descriptor
    try:
        # The gate (and its store) is only built for a task that has a delay.
        admitted = descriptor.initial_delay is None or runtime.gate.get().admit(descriptor)
        lock = runtime.lock.get()
    except FireflySchedulingError as err:
        logger.error("%s: fire of %s skipped: %s", fire.target, fire.instant.isoformat(), err)
        return FireResult(fire, runtime.node, FireSkip.UNAVAILABLE)
    if not admitted:
        return FireResult(fire, runtime.node, FireSkip.HELD_BACK)
    bounds: list[datetime] = []

    def body() -> None:
        # Resolved inside the guard: an import error is logged as this task's failure.
        task = runtime.callables.resolve(descriptor.target)
        bounds.append(datetime.now(UTC))
        try:
            task()
        finally:
            bounds.append(datetime.now(UTC))

    del lock  # built above so a broken provider is reported as UNAVAILABLE
    # Claims (exactly one run per fire), keep-alive, fencing and history live here.
    status = runtime.fire_runner.get().run(descriptor, fire.instant, body).status
    outcome = _OUTCOMES.get(status, RunOutcome.SKIPPED_LOCKED)
    started, ended = (bounds[0], bounds[-1]) if len(bounds) == 2 else (None, None)
    return FireResult(fire, runtime.node, outcome, started, ended)
