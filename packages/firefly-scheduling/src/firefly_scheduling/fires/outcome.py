"""A fire, its verdict and its result: the one vocabulary of what happened to a fire.

`Fire` is a task plus its scheduled instant in UTC, named alike on every node.
`Verdict` says what happened to it on one node, whoever decided: the fire runner
(succeeded, claimed elsewhere, too late, overlapping...), the host before the runner
(held back, shutting down, unavailable), or the plain guard `run_guarded` (which
reaches four of them). `FireResult` is that verdict with everything known about the
fire on this node; the runner returns it, the hosts hand it to their observers (the
fire log, telemetry, the `tick` report) and the CLI prints it.

The run history keeps its own, persisted `RunState` (running, succeeded, failed,
expired, skipped, timed_out): a record's place in its life across nodes, not one node's
verdict. `running` is no verdict at all, every verdict that ran nothing is stored as
`skipped` with its reason as text, and the stored words are a table's contents that
must not change when a verdict is added or renamed. The record stage's
`closing_state` (`fires.run_end`) is the only place a verdict becomes a stored
state.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.fires.retries import RetryOf
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.schedule.instants import as_utc
from firefly_scheduling.schedule.jitter import jitter_offset
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor


class TriggerKind(enum.StrEnum):
    """What made a fire: the value is how the run history and `--json` spell it."""

    #: The task's schedule named its instant.
    SCHEDULED = "scheduled"
    #: An operator asked for one extra run now.
    MANUAL = "manual"
    #: An operator replayed an instant of the schedule's past.
    BACKFILL = "backfill"
    #: A schedule defined at runtime named its instant.
    RUNTIME = "runtime"
    #: A failed run of the fire is run again.
    RETRY = "retry"
    #: The fleet was down at its instant; it runs late, within its catch-up window.
    CATCH_UP = "catch-up"


#: The kinds of fire a schedule names (and jitter delays): the code's, or a runtime one's.
_SCHEDULE_MADE: Final = frozenset({TriggerKind.SCHEDULED, TriggerKind.RUNTIME})


@dataclass(frozen=True, slots=True)
class Fire:
    """One occurrence of a task: the task, its instant in UTC, and what made it.

    Made once, where a host wakes (`Fire.at` converts the trigger's datetime to UTC
    there), then passed unchanged through the claim, the run and the record, down to
    the history row: nothing after the host converts or rebuilds it. The instant
    names the fire alike on every node; it is never the wall clock of a wake-up.
    """

    task: ScheduledDescriptor
    instant: datetime
    trigger: TriggerKind = TriggerKind.SCHEDULED
    #: Set on a retry (trigger `retry`): which retry, and when it is due (`fires.retries`).
    retry: RetryOf | None = None
    #: Set on a fire an operator asked for (trigger `manual` or `backfill`): when this
    #: node took it up, aware UTC. It is due then, not at its instant: grace and the
    #: claim's window count from here (`control.triggers`).
    asked_at: datetime | None = None
    #: Who asked for it (`Trigger.by`, `Backfill.by`), kept in its history record.
    asked_by: str | None = None

    def __post_init__(self) -> None:
        if self.instant.tzinfo is not UTC:
            raise ValueError(
                f"{self.task.target}: a fire's instant must be in UTC, got "
                f"{self.instant.isoformat()} (build it with Fire.at)"
            )

    @classmethod
    def at(
        cls,
        task: ScheduledDescriptor,
        instant: datetime,
        trigger: TriggerKind = TriggerKind.SCHEDULED,
    ) -> Fire:
        """The fire of `task` at `instant` (aware, any zone; a naive one is refused)."""
        return cls(task, as_utc(instant), trigger)

    @property
    def target(self) -> str:
        return self.task.target

    @property
    def recorded_trigger(self) -> str:
        """The trigger the run history keeps: what asked for the fire (the schedule, an
        operator's trigger or backfill, a runtime schedule). A catch-up fire and a
        retry are the schedule's own fire, told apart by their state and attempt."""
        if self.trigger in (TriggerKind.CATCH_UP, TriggerKind.RETRY):
            return TriggerKind.SCHEDULED.value
        return self.trigger.value

    @property
    def due(self) -> datetime:
        """When the fire may start: its instant, plus its jitter offset for a fire its
        schedule (or a runtime schedule) named of a task with `jitter=`
        (`schedule.jitter`). Grace counts from here; the fire is still named by its
        instant. A retry is due at its own time, a fire an operator asked for when a
        node took it up (`asked_at`)."""
        if self.retry is not None:
            return self.retry.due
        if self.asked_at is not None:
            return self.asked_at
        jitter = self.task.jitter
        if jitter is None or self.trigger not in _SCHEDULE_MADE:
            return self.instant
        return self.instant + jitter_offset(self.task.target, self.instant, jitter)

    @property
    def catchup_window(self) -> float:
        """Seconds this fire may start late on top of grace: its task's `catchup`
        window for a catch-up fire (planned while inside it), else 0."""
        window = self.task.catchup
        if self.trigger is TriggerKind.CATCH_UP and window is not None:
            return window
        return 0.0


class Verdict(enum.StrEnum):
    """What happened to one fire on this node. The value is the verdict in words.

    `--json`, the fire log and telemetry spell a verdict by its lower-cased name
    (`claimed_elsewhere`); tables and summaries by its value ("claimed elsewhere").
    """

    #: The body ran here and returned.
    SUCCEEDED = "succeeded"
    #: The body ran here and raised (or its target could not be resolved).
    FAILED = "failed"
    #: The body ran here past its task's `timeout=` (cancelled there, if `async def`).
    TIMED_OUT = "timed out"
    #: The body ran here and a newer fire asked it to stop (`overlap="cancel_other"`).
    CANCELLED = "cancelled"
    #: Another node (or an earlier attempt) holds this fire's claim.
    CLAIMED_ELSEWHERE = "claimed elsewhere"
    #: The history refused the start: the fire is finished, or a newer attempt owns it.
    ALREADY_RECORDED = "already recorded"
    #: The task lock is held by another run of the task (the previous fire still runs),
    #: or by another task sharing its lock name.
    #: (`run_guarded` claims no fire: there, the run may be this fire's on another node.)
    OVERLAPPING = "overlapping"
    #: Later than grace by this node's clock: skipped.
    TOO_LATE = "too late"
    #: The lock backend failed; the fire was skipped, never run unlocked.
    BACKEND_ERROR = "backend error"
    #: A died run found in the history, closed instead of adopted (too late).
    EXPIRED = "expired"
    #: The task lock was reported lost (or lapsed) before this fire's body could start.
    LOCK_LOST = "lock lost"
    #: An operator paused the task (or the whole fleet): the fire was not started.
    PAUSED = "paused"
    #: The host held it back: the task's initial delay has not elapsed.
    HELD_BACK = "held back"
    #: The host is shutting down: the fire was not started.
    SHUTTING_DOWN = "shutting down"
    #: The host could not build the lock or the anchor store: skipped.
    UNAVAILABLE = "unavailable"

    @property
    def ran(self) -> bool:
        """Whether the body ran here (successfully or not)."""
        return self in _RAN


_RAN = frozenset({Verdict.SUCCEEDED, Verdict.FAILED, Verdict.TIMED_OUT, Verdict.CANCELLED})


@dataclass(frozen=True, slots=True)
class Started:
    """A run as its start left it: the attempt the body is told, and whether the
    history holds the start (its end is then a `finish`, else the whole record)."""

    attempt: int
    recorded: bool


#: The start of a first attempt the history holds (written now, or with the claim).
FIRST_ATTEMPT: Final = Started(1, recorded=True)
#: The start of a fire nobody records (no history, an unlocked task).
UNRECORDED: Final = Started(1, recorded=False)


@dataclass(frozen=True, slots=True)
class BodyNotRun:
    """A started run whose body never ran (its task lock lost first), as the run stage
    hands it to the record stage: the verdict, and why."""

    verdict: Verdict
    attempt: int
    token: int | None
    error: str


@dataclass(frozen=True, slots=True)
class ClaimOutcome:
    """A fire's claim, taken before its run by a host that claims fires together.

    The resident host claims the fires due at one instant in one batch, before any
    reaches a worker thread (`hosts.apscheduler.claim_first`): a fire lost there never costs a
    thread. `verdict` is `SUCCEEDED` when this node won the claim, else why the fire
    is not this node's (every skip it implies is already recorded); `seconds` is how
    long the batch took, reported as the fire's claim time.

    `task_lock` is set when the fire's task lock was taken with its claim (see
    `TaskLockAhead`); None, the run acquires it itself. `error` says why a fire
    not won is not run (the backend's error, redacted), for its result.
    """

    verdict: Verdict
    seconds: float
    task_lock: TaskLockAhead | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TaskLockAhead:
    """A won fire's task lock, taken with its claim, before the fire reached a worker.

    On a backend with `batch_acquires` (Redis, memcached, PostgreSQL, etcd, ...)
    the resident host takes the task locks of the fires it won as one more request
    of the batch (`FireRunner.claim_fires`), so a worker sends no acquisition of its
    own.
    `answer` is the holding, None when the lock is held (the previous fire still
    runs), or the error that left it unknown. A holding handed here is the run's to
    release, whatever becomes of the fire.

    `started` is True when the history also recorded the fire's run as started
    (attempt 1) with the batch (`BatchStartingHistory`): its worker then neither
    reads the task's running records nor writes the start. `pause_checked` is True
    when the batch read the pauses and found the fire free to start
    (`fires.pausing`): its worker reads them no more.
    """

    answer: Holding | LockBackendError | None
    started: bool = False
    pause_checked: bool = False


def verdict_words(key: str) -> str:
    """A verdict spelt as `--json` and the fire log spell it (`claimed_elsewhere`), in words.

    A name this version does not know (a fire log written by another) reads with its
    underscores as spaces.
    """
    try:
        return Verdict[key.upper()].value
    except KeyError:
        return key.lower().replace("_", " ")


@dataclass(frozen=True)
class FireResult:
    """What happened to one fire on this node: its verdict and all that goes with it.

    * `verdict`: see `Verdict`; `node`: this node's name.
    * `attempt`: the attempt number the body was told (None when it did not run);
      `token`: the task lock's fencing token, when it was taken and fences.
    * `started_at`/`ended_at`: the wall clock around the body, when it ran here.
    * `lost`: the lock was reported lost (or lapsed) while the body ran.
    * `fenced`: the history refused this run's final write: a newer attempt took the
      fire over.
    * `error`: the exception (failed), or why the lock failed or was lost.
    * `claim_seconds`: how long claiming the fire took, its round trip included
      (None when no claim was attempted), for a host's metrics.
    * `adopted`: the died runs of earlier fires this fire ran again (adopted) or
      closed as expired before running its own body, one result each, in order;
      `adoption`: this result is one of those, not a fire the host triggered.
    * `retry`: the retry of this fire to run at `retry.due` (its task's `retries=`).
    * `buffered_seconds`: how long the fire waited, buffered, for an earlier run of
      its task to end (`buffer_one`, `buffer_all`); None when it did not wait.
    """

    fire: Fire
    node: str
    verdict: Verdict
    attempt: int | None = None
    token: int | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    lost: bool = False
    fenced: bool = False
    error: str | None = None
    claim_seconds: float | None = None
    adopted: tuple[FireResult, ...] = ()
    adoption: bool = False
    #: The retry this fire's failed run asks for (`fires.retries`), for the host to run
    #: at its due time; None when none follows.
    retry: Fire | None = None
    buffered_seconds: float | None = None

    @property
    def ran(self) -> bool:
        """Whether the body ran here for this fire (successfully or not)."""
        return self.verdict.ran

    @property
    def target(self) -> str:
        return self.fire.task.target

    @property
    def instant(self) -> datetime:
        return self.fire.instant
