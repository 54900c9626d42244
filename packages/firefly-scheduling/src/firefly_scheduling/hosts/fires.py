"""A fire and its result, as every host names them (`execute_fire` lives in `hosts.execute`).

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
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from firefly_scheduling.descriptor import ScheduledDescriptor
from firefly_scheduling.fires.outcome import FireOutcome, FireStatus
from firefly_scheduling.guard import RunOutcome
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


def __getattr__(name: str) -> Any:
    """`execute_fire` moved to `hosts.execute`; still importable from here (no cycle)."""
    if name == "execute_fire":
        from firefly_scheduling.hosts.execute import execute_fire  # noqa: PLC0415 - cycle

        return execute_fire
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
