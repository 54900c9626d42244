"""The run-history port: one record per fire, written under fencing.

A record is keyed by `(lock, task, instant)`, the fire's identity, and moves through

    running -> succeeded | failed | expired        skipped (no run at all)
    buffered -> running (a fire that waited for an earlier run, then started)

Every write that could race is a single atomic, conditional operation on the store:

* `start` inserts the record, or takes over a `running` record carrying an OLDER
  fencing token (adoption of a died run: `attempt + 1`), or replaces a `skipped`
  or `buffered` record (a node that was too late by its clock does not stop one
  that is not; a fire that waited starts). It
  refuses anything else: a finished fire is never run again through the history.
* `finish` closes a `running` record only while the record's token is not newer
  than the writer's. A zombie that wakes up after its fire was adopted writes with
  an older token and is refused, and a finished record never flips back.
* `skip` records a skip only where nothing is recorded yet.
* `record_run` writes the whole record of a run that ended, its start included:
  the run of a node whose `start` went unrecorded (the history was down or slow)
  or whose `finish` was refused. It writes where the fire has no record or a skip,
  closes a `running` record as `finish` would (taking it over as the next attempt
  when its token is older), and replaces a finished record only for a strictly
  newer token: the newest attempt that ran owns the record, as in `start`. A
  `succeeded` record is replaced by a success only: it may have committed with the
  task's own writes (`current_fire().atomic`), and a failure of a run the history
  never saw start cannot unsay it. An `expired` record under the run's own token
  takes its real end (`base.late_end`: its lock was lost while it ran). A refusal
  says why (`Recorded`): this run's already, a newer attempt's, or an older success.

The lock name is part of the key: it names a deployment's fires. Deployments sharing one
history database (staging and production, tenants) use other lock names for the same
targets; every read and write of a fire names both, so none adopts or refuses another's.

Tokens are the task lock's fencing tokens (strictly increasing per lock name on a
backend). A run without a token (a backend without fencing) can neither fence nor
be fenced: its `finish` is accepted only while the record has no token either.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from firefly_scheduling.errors import FireflySchedulingError

#: Longest error text kept in a record; the log has the full traceback.
MAX_ERROR_LENGTH = 2000
#: The trigger of a fire its schedule named, and of every record that predates triggers.
SCHEDULED = "scheduled"
#: Longest trigger word a store keeps.
MAX_TRIGGER_LENGTH = 16
#: Longest `requested_by` a store keeps (who asked; longer is cut and marked).
MAX_REQUESTED_BY_LENGTH = 255


class HistoryError(FireflySchedulingError):
    """The history store could not be reached or answered with an error.

    The fire runner logs it and carries on: the history is a record of what ran, the
    lock is what keeps a task from running twice. The message never contains a
    password.
    """


class RunState(enum.StrEnum):
    """Where a fire stands."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    #: The run stopped holding its lock without finishing (its node died or stalled)
    #: and nobody adopted it within grace.
    EXPIRED = "expired"
    #: Nobody ran it: later than grace, or the previous fire still ran.
    SKIPPED = "skipped"
    #: The body ran past its task's `timeout=`: an `async def` body was cancelled
    #: there; a plain one ran to its end, its task lock held until then.
    TIMED_OUT = "timed_out"
    #: It waits for an earlier run of its task (`buffer_one`, `buffer_all`): written
    #: when it began to wait, replaced by its run's record when it starts. One that
    #: stays `buffered` never ran: its node died or stalled while it waited.
    BUFFERED = "buffered"
    #: The body ran, and a newer fire asked it to stop (`overlap="cancel_other"`): an
    #: `async def` body was cancelled there; a plain one returned when it could.
    CANCELLED = "cancelled"
    #: A fire missed while the whole fleet was down, run late within its task's
    #: `catchup=` window, and its body returned (one that raised is `failed`).
    CAUGHT_UP = "caught_up"

    @property
    def terminal(self) -> bool:
        return self is not RunState.RUNNING


class Recorded(enum.Enum):
    """Whose run a fire's record holds after `RunHistory.record_run`."""

    #: This run's: written now.
    WRITTEN = "written"
    #: This run's already: finished under this run's token (an earlier write whose
    #: reply was lost). Nothing written.
    ALREADY = "already"
    #: A newer attempt's: the record carries a newer token (or a token, where this
    #: run has none), so this run was fenced. Nothing written.
    FENCED = "fenced"
    #: An older attempt's success: a success is replaced by a newer success only, so
    #: this run's failure is not written over it. Nothing written.
    SUCCEEDED = "succeeded"


#: The error text of a record closed by `expire_dead`.
EXPIRED_BY_PRUNE = "closed by prune: still running long after it started; its node is gone"

#: The states `finish` may write.
FINISHED_STATES = frozenset(
    {
        RunState.SUCCEEDED,
        RunState.FAILED,
        RunState.EXPIRED,
        RunState.TIMED_OUT,
        RunState.CANCELLED,
        RunState.CAUGHT_UP,
    }
)
#: The states `failures_since` lists: a run that ended and did not do its work.
FAILURE_STATES = frozenset({RunState.FAILED, RunState.EXPIRED, RunState.TIMED_OUT})
#: The records no run owns, which a start (or `record_run`) replaces as attempt 1.
PLACEHOLDER_STATES = frozenset({RunState.SKIPPED, RunState.BUFFERED})
#: The states `last_success` finds: a run that ended and did its work.
SUCCESS_STATES = frozenset({RunState.SUCCEEDED, RunState.CAUGHT_UP})


@dataclass(frozen=True)
class RunRecord:
    """One fire as the history knows it. Instants are aware UTC datetimes.

    `started_at` is None for a skip; `ended_at` is when it finished or was skipped.
    `error` holds the exception (failed), the reason (skipped, expired) or None.
    `lock` is the task lock's name: with `task` and `instant`, the record's key.
    `trigger` is what made the fire (`SCHEDULED`, "manual", "backfill", ...), and
    `requested_by` who asked for it (an operator's trigger or backfill; None for the
    schedule's fires): written by the write that created the record or replaced a
    placeholder, kept by the writes that adopt or close it; records written before
    they were kept read as `SCHEDULED`, None.
    """

    task: str
    instant: datetime
    node: str
    attempt: int
    state: RunState
    started_at: datetime | None
    ended_at: datetime | None
    error: str | None
    token: int | None
    lock: str
    trigger: str = SCHEDULED
    requested_by: str | None = None

    @property
    def reason(self) -> str | None:
        """Why nobody ran the fire: the text of a `skipped` (or `buffered`) record."""
        return self.error if self.state in PLACEHOLDER_STATES else None

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, when both are known."""
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()


@runtime_checkable
class RunHistory(Protocol):
    """Where fires are recorded. Thread-safe; instants passed in must be aware."""

    def start(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        token: int | None,
        at: datetime,
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> int | None:
        """Record the fire as running on `node`; its attempt number, or None if refused.

        1 for a new record or one replacing a skip; the previous attempt + 1 when a
        `running` record with an older token (or none) is taken over. None when the
        fire is finished, or running under a token at least as new.
        """
        ...

    def finish(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        token: int | None,
        state: RunState,
        error: str | None,
        at: datetime,
    ) -> bool:
        """Close a running record as `state`; False when refused (fenced, or not running)."""
        ...

    def record_run(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        token: int | None,
        state: RunState,
        error: str | None,
        started_at: datetime,
        ended_at: datetime,
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> Recorded:
        """Write the whole record of a run of `node` that ended as `state`.

        For a run whose `start` went unrecorded, or whose `finish` was refused: the
        record is written where there is none or a skip (attempt 1), a `running` one
        is closed when `finish` would close it (the next attempt when its token is
        older), a finished one replaced only for a strictly newer token (attempt + 1),
        a `succeeded` one only by a success, an `expired` one under this run's token
        too (`base.late_end`). Else nothing is written; the answer says whose the
        record is (`Recorded`). `ValueError` for a state that is not a finished one.
        """
        ...

    def skip(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        reason: str,
        at: datetime,
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> bool:
        """Record that nobody ran this fire, unless something is recorded already."""
        ...

    def skip_many(
        self,
        task: str,
        instants: Sequence[datetime],
        *,
        lock: str,
        node: str,
        reason: str,
        at: datetime,
    ) -> int:
        """`skip` for each of `instants` (one task, one reason); how many were new.

        A node that starts after an outage records up to a thousand fires nobody ran
        at once; a store writes them in as few round trips as it can
        (`BaseRunHistory` calls `skip` for each). A failure may leave some written:
        calling it again is harmless, as a skip never overwrites a record.
        """
        ...

    def unfinished(self, task: str, *, lock: str) -> list[RunRecord]:
        """The `running` records of `task` under `lock`, oldest instant first."""
        ...

    def runs(
        self, task: str | None = None, limit: int = 20, *, lock: str | None = None
    ) -> list[RunRecord]:
        """The latest records (of `task` and/or `lock`, or of all), newest instant first."""
        ...

    def last_success(self, task: str, *, lock: str) -> RunRecord | None:
        """The newest `succeeded` (or `caught_up`) record of `task` under `lock`."""
        ...

    def recorded_instants(
        self,
        task: str,
        *,
        lock: str,
        after: datetime,
        until: datetime,
        states: Set[RunState] | None = None,
    ) -> set[datetime]:
        """The instants (aware UTC) of every record of `task` under `lock` in `states`
        (whatever its state when None), with `after < instant <= until`: one read,
        however many.

        Catch-up (`fires.catching_up`) reads here which fires of its window were
        run or recorded by some node; every other instant of the window was missed.
        A backfill (`fires.backfill_plan`) reads the instants that succeeded.
        """
        ...

    def records_between(
        self, task: str, *, lock: str, after: datetime, until: datetime, states: Set[RunState]
    ) -> list[RunRecord]:
        """The records of `task` under `lock` in `states` with `after < instant <= until`,
        oldest instant first: one read. A backfill reads here the failed runs of its
        window, to run each again as the attempt after the recorded one."""
        ...

    def failures_since(self, since: datetime) -> list[RunRecord]:
        """`failed`, `expired` and `timed_out` records ended at or after `since`, newest first."""
        ...

    def expire_dead(self, started_before: datetime, *, at: datetime) -> int:
        """Close `running` records started before `started_before` as expired; how many."""
        ...

    def prune(self, before: datetime) -> int:
        """Delete finished and skipped records of fires before `before`; never running ones."""
        ...

    def close(self) -> None:
        """Drop connections; safe to call twice."""
        ...


@dataclass(frozen=True)
class NewRun:
    """A fire for `BatchStartingHistory.start_new_many`: its key, and its task lock's token."""

    lock: str
    task: str
    instant: datetime
    token: int | None


@runtime_checkable
class BatchStartingHistory(Protocol):
    """A history that records the starts of several new fires in one round trip.

    The resident host wins the fires of an instant together, with their task locks
    (`FireRunner.claim_fires`); on PostgreSQL each won fire's worker then sent two
    statements of its own before its body (the task's running records, its start),
    and with 100 fires a second those blocking round trips from up to 64 threads
    cost more CPU in thread switches than the statements. A store that
    can answer for all of them in one request implements this; the runner calls it
    only where a store does.
    """

    def start_new_many(self, runs: Sequence[NewRun], *, node: str, at: datetime) -> list[bool]:
        """Start each of `runs` that is new: attempt 1, `running` on `node`; which were.

        A run is new when its fire has no record and its task (under its lock) no
        `running` record at any instant. Nothing else is written: False is no
        refusal, only "not here". Such a fire has a record (a skip to replace, a run
        to take over or refuse) or its task a run to adopt or expire, and the caller
        starts it the usual way, `unfinished` then `start`. Every fire must be one
        whose task lock the caller holds, each lock at most once; instants aware.
        A `HistoryError` leaves it unknown which were started (a lost reply): a
        started one is then refused by the caller's `start`, and its record,
        `running`, is adopted by the task's next fire, as any died run is.
        """
        ...


#: The states a retry's start takes over (`RetryStartingHistory.start_retry`).
RETRIED_STATES = frozenset({RunState.FAILED, RunState.TIMED_OUT})


@runtime_checkable
class RetryStartingHistory(Protocol):
    """A history that starts a retry of a failed fire on the fire's own record.

    A fire's record is keyed by the fire; its retries (`fires.retries`) are further
    attempts at it, so a retry's start takes the finished record over as the next
    attempt, as an adoption takes over a died run. The record then holds the newest
    attempt of the fire; the earlier attempts' errors are in the log.
    """

    def start_retry(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        token: int | None,
        after_attempt: int,
        note: str | None,
        at: datetime,
    ) -> int | None:
        """Record the retry as running on `node`: attempt `after_attempt + 1`, or None.

        One conditional write: it takes the record over only while it is `failed` or
        `timed_out` at attempt `after_attempt`, so of two starts of the same retry at
        most one is written, and a retry never reopens a fire that succeeded or that
        a newer attempt owns. `note` is the record's text while it runs (which retry).
        """


@runtime_checkable
class BufferingHistory(Protocol):
    """A history that marks a fire waiting for an earlier run of its task.

    The lock stage writes it when a fire of a `buffer_one` or `buffer_all` task begins to
    wait (`fires.overlap_wait`); the fire's start replaces it, as it replaces a skip.
    """

    def buffer(
        self, task: str, instant: datetime, *, lock: str, node: str, reason: str, at: datetime
    ) -> bool:
        """Record the fire as `buffered` with `reason`, unless something is recorded."""
        ...


def checked_trigger(trigger: object) -> str:
    """`trigger` if a store can keep it: a non-empty word of at most `MAX_TRIGGER_LENGTH`."""
    if (
        not isinstance(trigger, str)
        or not trigger
        or len(trigger) > MAX_TRIGGER_LENGTH
        or not trigger.replace("-", "").isalpha()
        or not trigger.isascii()
    ):
        raise ValueError(
            f"a record's trigger must be a word of at most {MAX_TRIGGER_LENGTH} ASCII "
            f"letters or dashes, got {trigger!r}"
        )
    return trigger


def clip_requested_by(text: str | None) -> str | None:
    """`text` cut to `MAX_REQUESTED_BY_LENGTH` characters, marked when cut."""
    if text is None or len(text) <= MAX_REQUESTED_BY_LENGTH:
        return text
    return text[: MAX_REQUESTED_BY_LENGTH - 1] + "…"


def clip_error(text: str | None) -> str | None:
    """`text` cut to `MAX_ERROR_LENGTH` characters, marked when cut."""
    if text is None or len(text) <= MAX_ERROR_LENGTH:
        return text
    return text[: MAX_ERROR_LENGTH - 1] + "…"
