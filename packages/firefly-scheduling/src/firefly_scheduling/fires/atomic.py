"""`current_fire().atomic(...)`: the fire's success committed in the task's own transaction.

A body that writes to the database its run history lives in can have its fire's
outcome commit with those writes, or not at all. When the block exits without an
exception, the history's row of this run is set to `succeeded` by ONE guarded
`UPDATE` sent through the caller's own connection, inside the caller's transaction:
it matches only the row of this fire that is still `running` under this run's
attempt and fencing token, so a zombie whose fire was adopted matches nothing and
gets `StaleFireError` (its transaction rolled back, its writes with it). The caller
commits as usual; once it has, the fire is done: the record stage finds its end
written (`fires.recording`), and no adoption runs it again. Rolled back, or its node
dead before the commit, nothing of it remains, and the running row is adopted as
any died run's.

Which connections work, and how "the same database" is decided, is the history's
business (`TransactionalHistory`; the SQL history in `firefly-scheduling-database`):
this module imports no driver. A history that cannot write through a caller's
connection (none, memory, Redis) is refused with a `ConfigurationError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Literal, Protocol, runtime_checkable

from firefly_scheduling.errors import ConfigurationError, FireflySchedulingError
from firefly_scheduling.history.port import RunRecord


class AtomicOutcomeError(FireflySchedulingError):
    """The fire's outcome cannot be committed in the task's transaction (see the message)."""


class StaleFireError(AtomicOutcomeError):
    """This run no longer owns its fire: the guarded write matched no row.

    A newer attempt took the fire over (the node stalled, its lease lapsed, another
    node adopted the fire), or the fire's record is finished. The caller's
    transaction is rolled back, and the task's writes in it with it.
    """

    def __init__(self, target: str, instant: datetime, attempt: int, token: int | None) -> None:
        self.target, self.instant, self.attempt, self.token = target, instant, attempt, token
        super().__init__(
            f"{target}: fire {instant.isoformat()} (attempt {attempt}, token {token}) is no "
            "longer this run's: a newer attempt owns its record, or it is finished; the "
            "transaction is rolled back, with the task's writes in it"
        )


@dataclass(frozen=True, slots=True)
class GuardedSuccess:
    """The run whose record the guarded write closes as `succeeded`, and when."""

    lock: str
    task: str
    instant: datetime
    attempt: int
    token: int | None
    ended_at: datetime


class CallerTransaction(Protocol):
    """The caller's transaction, as a history drives it from a `with` block."""

    asynchronous: Literal[False]

    def enter(self) -> None:
        """Check the transaction at the block's start (Django: enter `transaction.atomic`)."""
        ...

    def write(self, success: GuardedSuccess) -> int:
        """Send the guarded write in the caller's transaction; how many rows it matched."""
        ...

    def close(self, error: BaseException | None, *, stale: bool) -> None:
        """The block ends (with `error`); roll the transaction back where `stale`."""
        ...


class AsyncCallerTransaction(Protocol):
    """The caller's transaction, as a history drives it from an `async with` block."""

    asynchronous: Literal[True]

    async def enter(self) -> None: ...

    async def write(self, success: GuardedSuccess) -> int: ...

    async def close(self, error: BaseException | None, *, stale: bool) -> None: ...


@runtime_checkable
class TransactionalHistory(Protocol):
    """A run history that can write a run's success through a caller's connection.

    `caller_transaction` refuses (`ConfigurationError`, naming both places, no
    credentials) a connection it cannot use: another database or server, a driver
    it does not know.
    """

    def caller_transaction(
        self, connection: object | None, *, using: str | None
    ) -> CallerTransaction | AsyncCallerTransaction: ...


@runtime_checkable
class RecordReadingHistory(Protocol):
    """A transactional history that reads one fire's record in one statement.

    The record stage of a run whose block wrote its success reads the record first
    (`fires.run_end.committed_here`): committed, the fire is done and nothing is
    sent; otherwise `record_run` closes it as for any run. Without this read,
    `record_run` finds the same, with an insert, an update and a read.
    """

    def record_of(self, task: str, instant: datetime, *, lock: str) -> RunRecord | None:
        """The record of the fire `(lock, task, instant)`, or None where it has none."""
        ...


class OutcomeSeat:
    """Per fire: where its outcome may be written in a transaction, and whether it was.

    Made by the run stage only for a fire the history records (a locked task with a
    history), so a fire that never calls `atomic` costs this one small object.
    """

    __slots__ = ("clock", "history", "start_recorded", "written")

    def __init__(
        self, history: object, clock: Callable[[], datetime], *, start_recorded: bool
    ) -> None:
        self.history = history
        self.clock = clock
        self.start_recorded = start_recorded
        #: The guarded write matched in a transaction (committed or not: the record
        #: stage reads which).
        self.written = False


class RunningFire(Protocol):
    """What the block reads of the fire it runs in (`fires.context.FireContext`)."""

    @property
    def target(self) -> str: ...
    @property
    def instant(self) -> datetime: ...
    @property
    def attempt(self) -> int: ...
    @property
    def token(self) -> int | None: ...
    @property
    def lock_name(self) -> str | None: ...
    @property
    def outcome(self) -> OutcomeSeat | None: ...


def idempotency_key(target: str, instant: datetime) -> str:
    """A key naming one fire, the same on every attempt and node: `target@instant`."""
    return f"{target}@{instant.isoformat()}"


class AtomicBlock:
    """The block `FireContext.atomic` returns: `with` for a sync connection (and
    Django), `async with` for an asyncio one."""

    __slots__ = ("_connection", "_context", "_transaction", "_using")

    def __init__(self, context: RunningFire, connection: object | None, using: str | None):
        self._context = context
        self._connection = connection
        self._using = using
        self._transaction: CallerTransaction | AsyncCallerTransaction | None = None

    def __enter__(self) -> RunningFire:
        transaction = self._begin()
        if transaction.asynchronous:
            raise ConfigurationError(
                f"{self._context.target}: current_fire().atomic() was given an asyncio "
                f"connection ({type(self._connection).__name__}): use `async with`"
            )
        try:
            transaction.enter()
        except ConfigurationError as err:
            raise ConfigurationError(f"{self._context.target}: {err}") from None
        self._transaction = transaction
        return self._context

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        transaction = self._transaction
        assert transaction is not None
        assert not transaction.asynchronous
        if error is not None:
            transaction.close(error, stale=False)
            return False
        success = self._success()
        try:
            matched = transaction.write(success)
        except BaseException as err:
            transaction.close(err, stale=False)
            raise
        if matched != 1:
            stale = self._stale(success)
            transaction.close(stale, stale=True)
            raise stale
        transaction.close(None, stale=False)
        self._seat().written = True
        return False

    async def __aenter__(self) -> RunningFire:
        transaction = self._begin()
        if not transaction.asynchronous:
            raise ConfigurationError(
                f"{self._context.target}: current_fire().atomic() was given a blocking "
                f"connection ({type(self._connection).__name__}) in `async with`: use `with`"
            )
        try:
            await transaction.enter()
        except ConfigurationError as err:
            raise ConfigurationError(f"{self._context.target}: {err}") from None
        self._transaction = transaction
        return self._context

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        transaction = self._transaction
        assert transaction is not None
        assert transaction.asynchronous
        if error is not None:
            await transaction.close(error, stale=False)
            return False
        success = self._success()
        try:
            matched = await transaction.write(success)
        except BaseException as err:
            await transaction.close(err, stale=False)
            raise
        if matched != 1:
            stale = self._stale(success)
            await transaction.close(stale, stale=True)
            raise stale
        await transaction.close(None, stale=False)
        self._seat().written = True
        return False

    def _seat(self) -> OutcomeSeat:
        seat = self._context.outcome
        if seat is None:
            raise ConfigurationError(
                f"{self._context.target}: current_fire().atomic() commits the fire's "
                "record with the task's writes, and this fire has none: no run history "
                "is configured, or the task is unlocked (only locked tasks are recorded)"
            )
        return seat

    def _begin(self) -> CallerTransaction | AsyncCallerTransaction:
        context, seat = self._context, self._seat()
        history = seat.history
        if not isinstance(history, TransactionalHistory):
            raise ConfigurationError(
                f"{context.target}: current_fire().atomic() needs a run history kept where "
                f"the task's own connection writes (docs/effectively-once.md); this "
                f"runner's history is a {type(history).__qualname__}, which cannot write "
                "through the task's connection"
            )
        if seat.written:
            raise AtomicOutcomeError(
                f"{context.target}: fire {context.instant.isoformat()}: its outcome is "
                "already written in a transaction; a fire has one atomic block"
            )
        if not seat.start_recorded:
            raise AtomicOutcomeError(
                f"{context.target}: fire {context.instant.isoformat()}: its start is not in "
                "the run history (the history failed when the run started), so there is no "
                "record to commit with the task's writes"
            )
        try:
            return history.caller_transaction(self._connection, using=self._using)
        except ConfigurationError as err:
            raise ConfigurationError(f"{context.target}: {err}") from None

    def _success(self) -> GuardedSuccess:
        context, seat = self._context, self._seat()
        assert context.lock_name is not None  # a seat exists only for a locked task
        return GuardedSuccess(
            context.lock_name,
            context.target,
            context.instant,
            context.attempt,
            context.token,
            seat.clock(),
        )

    def _stale(self, success: GuardedSuccess) -> StaleFireError:
        return StaleFireError(success.task, success.instant, success.attempt, success.token)
