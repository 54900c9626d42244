# async-to-sync: rename AsyncFireRunner FireRunner
# async-to-sync: rename AsyncKeepAlive KeepAlive
# async-to-sync: rename firefly_scheduling.locks.asyncio_keepalive firefly_scheduling.locks.keepalive  # noqa: E501
# async-to-sync: rename AsyncRunRecorder RunRecorder
"""`AsyncFireRunner`: run one fire of a task at most once across the fleet, and record it.

Written once, for asyncio, in `fires/runner_async.py`; the synchronous flavour in
`fires/runner.py` is generated from it by `tools/async_to_sync.py`, so the rules
below bind both alike. The asyncio flavour awaits the lock and the body on the
caller's event loop and calls the (synchronous) run history in a worker thread
(`off_loop`), so a slow history never stalls the loop.

`AsyncFireRunner.run(fire, body)` is the one place where a host's fire
meets the lock and the history. For a locked task it does, in order:

1. **Grace.** A fire more than `grace` seconds late (by this node's clock) is
   skipped and the skip recorded: no catch-up flood after a stall.
2. **Claim** (cron and `fixed_rate` tasks, whose instants every node names alike):
   one lock acquisition blocking every later attempt at this fire for its window
   (`fires.claims`). Lost: another node has the fire; nothing is recorded here.
3. **Task lock**, fenced where the backend can: the mutual exclusion between fires
   of one task, as before. Held: the previous fire still runs (or another task
   sharing the lock name, see `fires.lock_holders`), so this one is skipped and
   recorded. Its fencing token orders every holding of the task lock,
   so it orders the attempts at one fire too.
4. **Keep-alive** of the task lock while bodies run (`locks.keepalive`).
5. **Adoption.** Holding the task lock proves no other run of the task is alive,
   so a `running` record in the history is a died (or stalled) run. The newest one
   still within grace is adopted: run again here with `attempt + 1` and the newer
   token (its zombie's late writes are then refused). Older ones are closed as
   `expired`. At most one extra run, never a flood.
6. **The body**, in try/except/finally, inside `current_fire()`'s context, between
   `history.start` (which may refuse: the fire is finished, or owned by a newer
   attempt) and the record of its end (`fires.recording`: the whole run where the
   start went unrecorded; fenced only where a newer attempt owns the record). Just
   before it, the task lock is checked once more: by its lease's remaining margin,
   and on a session backend by the server (a session lock ends with its session, at
   any moment).
7. The task lock is released, once the end is recorded or the fire is past
   `grace + clock_skew` (no node adopts it then): a finished fire is never adopted
   and run again. The claim is kept for its window.

It never runs a body unlocked: a `LockBackendError` skips the fire (logged), and a
lock reported lost during an adopted run stops the fire that follows it. Exceptions
from the body are logged with the task target and never propagate; only
`KeyboardInterrupt`/`SystemExit` do, after the fire is recorded as failed and the
lock released. History failures are logged and never stop a run: the lock keeps a
task from running twice, the history records what ran (every run that ran,
eventually: what it could not write is remembered and written later).

Round trips on the lock backend per fire: 1 for a node that loses the claim, as
the plain guard's lost `try_acquire`; for the winner, claim + fenced acquire +
release, one more than the plain guard's acquire + release wherever the backend
fences within the acquisition's round trip (every first-party one but the database
backend on MySQL/MariaDB and SQLite, which needs a second statement); plus the
pre-body check on PostgreSQL and MySQL. A host that claims fires together
(`claim_fires`, the resident host) sends the claims of one instant as one request
where the backend can, and, where it also batches acquisitions (`batch_acquires`:
Redis, one pipeline per primary on a cluster; memcached, PostgreSQL, MySQL, etcd,
the database backend on PostgreSQL, MySQL and SQLite), the task locks of the fires it won as
a second one, so a won fire's worker does not send its own acquisition. Where the
history also starts runs in batches (`BatchStartingHistory`: the SQL history, the
memory one), it then records the runs of those fires as started, so their workers
neither read the task's running records nor write the start: one more request for
the batch, two fewer before each body. A fire it cannot start so (a died run to
adopt, a record already there) is started by its worker as before.
docs/guarantees.md has the measured table. Keep-alive adds one per `lock_ttl / 3` of
body time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TypeAlias

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.fires.claims import claim_name, claim_seconds
from firefly_scheduling.fires.context import FireContext, entered
from firefly_scheduling.fires.lock_holders import LockHolders
from firefly_scheduling.fires.outcome import (
    ClaimOutcome,
    Fire,
    FireResult,
    TaskLockAhead,
    Verdict,
    closing_state,
)
from firefly_scheduling.fires.recording_async import AsyncRunRecorder, off_loop
from firefly_scheduling.fires.unrecorded import UnrecordedFinish
from firefly_scheduling.history.port import (
    BatchStartingHistory,
    HistoryError,
    NewRun,
    Recorded,
    RunHistory,
)
from firefly_scheduling.history.selection import resolve_history
from firefly_scheduling.locks.asyncio_keepalive import AsyncKeepAlive
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import (
    AsyncBatchAcquiringLock,
    AsyncBatchClaimingLock,
    AsyncDistributedLock,
    capabilities_of,
)
from firefly_scheduling.locks.port_holdings_async import async_claiming_lock, async_holding_lock
from firefly_scheduling.schedule.instants import as_utc
from firefly_scheduling.settings import (
    DEFAULT_CLOCK_SKEW_SECONDS,
    DEFAULT_GRACE_SECONDS,
    Settings,
    default_node_name,
)
from firefly_scheduling.tasks.descriptor import DEFAULT_LOCK_TTL_SECONDS, ScheduledDescriptor

logger = logging.getLogger("firefly_scheduling.fires")

#: A task body as the runner calls it (a coroutine function in the asyncio flavour).
Body: TypeAlias = Callable[[], Awaitable[object]]  # sync: Body: TypeAlias = Callable[[], object]
#: Why a fire started with its claim is closed as expired when no worker took it in time.
TOO_LATE_FOR_A_WORKER = "it waited past grace for a worker after its claim, and never ran"
#: The share of its lease a body must have ahead of it when it starts; with less,
#: one renewal on the server refreshes the lease first (see `_still_held`).
BODY_LEASE_MARGIN = 0.5

#: Where the runner reads the time: an aware datetime. Tests inject skewed clocks here.
WallClock = Callable[[], datetime]


def utc_now() -> datetime:
    """The system wall clock, aware, in UTC."""
    return datetime.now(UTC)


class AsyncFireRunner:
    """Runs fires against one lock and one (optional) history; one per host, thread-safe.

    * `grace`: seconds a fire may be late and still be claimed or adopted.
    * `clock_skew`: the largest clock difference between two nodes the claims
      tolerate (added to the claim's window).
    * `clock`: the wall clock, aware UTC; inject an offset to simulate a skewed node.
    * `node`: this process's name in the history (default `hostname-pid`).
    * `keepalive_interval`: seconds between renewals (default `lock_ttl / 3`).

    `close()` releases the claims a session backend still holds and closes a history
    built by `from_settings`.
    """

    def __init__(
        self,
        lock: AsyncDistributedLock,
        *,
        history: RunHistory | None = None,
        clock: WallClock = utc_now,
        grace: float = DEFAULT_GRACE_SECONDS,
        clock_skew: float = DEFAULT_CLOCK_SKEW_SECONDS,
        node: str | None = None,
        keepalive_interval: float | None = None,
        owns_history: bool = False,
    ) -> None:
        if not grace > 0:
            raise ValueError(f"grace must be > 0 seconds, got {grace!r}")
        if not clock_skew >= 0:
            raise ValueError(f"clock_skew must be >= 0 seconds, got {clock_skew!r}")
        self._lock = lock
        self._history = history
        self._clock = clock
        self._grace = float(grace)
        self._clock_skew = float(clock_skew)
        self._node = node or default_node_name()
        self._keepalive_interval = keepalive_interval
        self._owns_history = owns_history
        self._holdings = async_holding_lock(lock)
        self._claims = async_claiming_lock(lock)
        claims = self._claims
        self._batch_claims = claims if isinstance(claims, AsyncBatchClaimingLock) else None
        self._capabilities = capabilities_of(lock)
        holdings = self._holdings
        self._batch_acquires: AsyncBatchAcquiringLock | None = None
        if self._capabilities.batch_acquires and isinstance(holdings, AsyncBatchAcquiringLock):
            self._batch_acquires = holdings
        store: object = history  # mypy does not intersect two protocols
        self._batch_starts = store if isinstance(store, BatchStartingHistory) else None
        self._lock_holders = LockHolders()
        self._record = AsyncRunRecorder(
            history, clock=clock, node=self._node, grace=self._grace, clock_skew=self._clock_skew
        )

    @classmethod
    def from_settings(
        cls,
        lock: AsyncDistributedLock,
        settings: Settings | None = None,
        *,
        clock: WallClock = utc_now,
        node: str | None = None,
    ) -> AsyncFireRunner:
        """A runner with the configured history, grace and clock-skew tolerance.

        `node` overrides `settings.node`. Raises `ConfigurationError` for a history
        URL that cannot be used, so a host fails at boot rather than on a fire.
        """
        settings = Settings.from_env() if settings is None else settings
        return cls(
            lock,
            history=resolve_history(settings),
            clock=clock,
            grace=settings.grace,
            clock_skew=settings.clock_skew,
            node=node or settings.node,
            owns_history=True,
        )

    @property
    def history(self) -> RunHistory | None:
        return self._history

    @property
    def node(self) -> str:
        return self._node

    async def run(self, fire: Fire, body: Body, *, claim: ClaimOutcome | None = None) -> FireResult:
        """Run `fire` if it is this node's.

        `claim` is the fire's claim when `claim_fires` already took it: the runner
        then goes on from its verdict, without a round trip of its own.
        """
        descriptor, instant = fire.task, fire.instant
        await self._record.retry_unrecorded()
        lock_name = descriptor.lock_name
        if lock_name is None:
            return await self._run_unlocked(descriptor, instant, body)
        if claim is not None:
            return await self._run_preclaimed(descriptor, lock_name, instant, body, claim)
        return await self._run_locked(descriptor, lock_name, instant, body)

    async def claim_fires(self, batch: Sequence[Fire]) -> list[ClaimOutcome]:
        """Claim several fires of locked recurring tasks together, ahead of their runs.

        The checks and records of `run` are the same (too late: skipped and recorded;
        a failed claim: recorded, never run), but the claims go to the backend as one
        batch when it takes batches (`AsyncBatchClaimingLock`), else one by one. Pass
        each outcome to `run(..., claim=)`: a won claim not run is a fire lost.

        A skip record that fails is tried once here, not for `SKIP_RETRY_SECONDS`:
        the batch's other fires wait for these writes. It is remembered and written
        before later fires, as every failed history write is.
        """
        started = time.perf_counter()
        fires = [(fire.task, fire.instant) for fire in batch]
        verdicts: list[Verdict | None] = []
        for descriptor, instant in fires:
            lock_name = descriptor.lock_name
            if lock_name is None or descriptor.fixed_delay is not None:
                raise ValueError(f"{descriptor.target}: only a locked recurring fire is claimed")
            late = await self._skip_if_too_late(
                lock_name, descriptor.target, as_utc(instant), patience=0.0
            )
            verdicts.append(Verdict.TOO_LATE if late else None)
        pending = [
            (descriptor.target, descriptor.lock_name or "", as_utc(instant))
            for (descriptor, instant), verdict in zip(fires, verdicts, strict=True)
            if verdict is None
        ]
        claimed = iter(await self._claim_all(pending, patience=0.0))
        answers = [
            (verdict, None) if verdict is not None else next(claimed) for verdict in verdicts
        ]
        decided = [verdict for verdict, _ in answers]
        ahead = await self._task_locks_ahead(fires, decided)
        if ahead:
            ahead = await self._starts_ahead(fires, ahead)
        took = time.perf_counter() - started
        return [
            ClaimOutcome(verdict, took, ahead.get(index), error=error)
            for index, (verdict, error) in enumerate(answers)
        ]

    async def _task_locks_ahead(
        self, fires: Sequence[tuple[ScheduledDescriptor, datetime]], verdicts: Sequence[Verdict]
    ) -> dict[int, TaskLockAhead]:
        """The task locks of the fires won, as one request, on a backend that batches them.

        Each won fire's worker would otherwise send its own acquisition: with 200
        fires a second, a blocking round trip per fire from up to 64 threads costs
        more CPU in thread switches than the request itself (issue 12). Elsewhere
        (no `batch_acquires`) nothing is taken here: one by one, in this one thread,
        they would delay the fires behind them.
        """
        batch = self._batch_acquires
        won = [index for index, verdict in enumerate(verdicts) if verdict is Verdict.SUCCEEDED]
        if batch is None or not won:
            return {}
        requests = [(fires[index][0].lock_name or "", _lock_ttl(fires[index][0])) for index in won]
        answers = await batch.acquire_many(requests, fenced=self._capabilities.fenced)
        return {index: TaskLockAhead(answer) for index, answer in zip(won, answers, strict=True)}

    async def _starts_ahead(
        self,
        fires: Sequence[tuple[ScheduledDescriptor, datetime]],
        ahead: dict[int, TaskLockAhead],
    ) -> dict[int, TaskLockAhead]:
        """`ahead` with the runs of the fires whose task locks it holds started, where
        the history starts new runs in one round trip (`BatchStartingHistory`).

        The fires' workers would otherwise each read the task's running records and
        write their start, two blocking round trips before the body (issue 12). A
        fire this cannot start (one to adopt or expire first, one recorded already)
        is left to its worker, as is every fire when the history fails here: its
        worker meets the failure again, and logs it.
        """
        history = self._batch_starts
        held = {
            index: lock.answer for index, lock in ahead.items() if isinstance(lock.answer, Holding)
        }
        if history is None or not held:
            return ahead
        runs = [
            NewRun(holding.name, fires[index][0].target, as_utc(fires[index][1]), holding.fence)
            for index, holding in held.items()
        ]
        try:
            started = await off_loop(
                history.start_new_many, runs, node=self._node, at=self._clock()
            )
        except HistoryError as err:
            logger.info("the runs of %d fires are left to their workers: %s", len(runs), err)
            return ahead
        begun = dict(ahead)
        for index, new in zip(held, started, strict=True):
            if new:
                begun[index] = replace(ahead[index], started=True)
        return begun

    async def recent_recorded_instants(
        self, descriptor: ScheduledDescriptor, limit: int
    ) -> list[datetime]:
        """The instants of the task's newest `limit` history records, newest first.

        Where a host that starts looks for the fires nobody ran: an empty list without
        a history, for an unlocked task, for a task never recorded, or when the
        history cannot be read (logged; the fires it would have named stay unnamed,
        as they were before this lookup existed).
        """
        history, lock = self._history, descriptor.lock_name
        if history is None or lock is None:
            return []
        try:
            records = await off_loop(history.runs, descriptor.target, limit, lock=lock)
        except HistoryError as err:
            logger.warning(
                "%s: its newest history records are unreadable: %s", descriptor.target, err
            )
            return []
        return [record.instant for record in records]

    async def record_passed_over(
        self, descriptor: ScheduledDescriptor, instants: Sequence[datetime], reason: str
    ) -> int:
        """Record fires this node's host passed over as skipped, where nothing is recorded.

        A host that never hands a fire to `run` (APScheduler coalescing due times, or
        dropping one while the job's previous run still goes, or a node back from an
        outage) says so here, so every fire ends up run or recorded with a reason.
        Harmless where another node ran the fire: a skip writes only where nothing
        is recorded, and a later `start` replaces it. One `skip_many` (a few
        statements on a SQL store, however many instants), no retry (the host is
        waiting); on a history failure every instant is remembered and written
        before later fires (see `unrecorded`). Returns how many were new. An
        unlocked task has no history record, so nothing is written.
        """
        history, lock = self._history, descriptor.lock_name
        if history is None or lock is None or not instants:
            return 0
        at = self._clock()
        utc_instants = [as_utc(instant) for instant in instants]
        try:
            return await off_loop(
                history.skip_many,
                descriptor.target,
                utc_instants,
                lock=lock,
                node=self._node,
                reason=reason,
                at=at,
            )
        except HistoryError as err:
            logger.warning(
                "%s: %d passed-over fire(s) from %s unrecorded (retried before the next fires): %s",
                descriptor.target,
                len(utc_instants),
                _at(min(utc_instants)),
                err,
            )
            self._record.remember_skips(lock, descriptor.target, utc_instants, reason, at)
            return 0

    async def aclose(self) -> None:
        """Close an owned history; fire claims outlive the process by design."""
        await self._record.retry_unrecorded(immediately=True)
        if self._owns_history and self._history is not None:
            await off_loop(self._history.close)

    # -- the two paths --------------------------------------------------------------

    async def _run_unlocked(
        self, descriptor: ScheduledDescriptor, instant: datetime, body: Body
    ) -> FireResult:
        """An unlocked task runs on every node: no claim, no history (it would collide)."""
        if self._too_late(descriptor.target, instant) is not None:
            return self._result(Verdict.TOO_LATE, descriptor, instant)
        return await self._execute(
            descriptor, instant, body, holding=None, lost=threading.Event(), recorded=False
        )

    async def _run_locked(
        self,
        descriptor: ScheduledDescriptor,
        lock_name: str,
        instant: datetime,
        body: Body,
    ) -> FireResult:
        target = descriptor.target
        if await self._skip_if_too_late(lock_name, target, instant):
            return self._result(Verdict.TOO_LATE, descriptor, instant)
        if descriptor.fixed_delay is not None:
            return await self._run_claimed(descriptor, lock_name, instant, body)
        started = time.perf_counter()
        claimed, error = await self._claim(target, lock_name, instant)
        claim_took = time.perf_counter() - started
        if claimed is not Verdict.SUCCEEDED:
            return self._result(claimed, descriptor, instant, error=error, claim_seconds=claim_took)
        return await self._run_claimed(
            descriptor, lock_name, instant, body, claim_seconds=claim_took
        )

    async def _run_preclaimed(
        self,
        descriptor: ScheduledDescriptor,
        lock_name: str,
        instant: datetime,
        body: Body,
        claim: ClaimOutcome,
    ) -> FireResult:
        """`_run_locked` after `claim_fires`: its checks and skips are done.

        A won fire is checked against grace once more: it may have waited for a
        worker (a saturated pool, a stalled process) since its claim, and a fire
        starts only within grace, as one claimed on its own does, so inside its
        claim's window.
        """
        if claim.verdict is not Verdict.SUCCEEDED:
            return self._result(
                claim.verdict, descriptor, instant, error=claim.error, claim_seconds=claim.seconds
            )
        if await self._skip_if_too_late(lock_name, descriptor.target, instant):
            ahead = claim.task_lock
            if ahead is not None and isinstance(ahead.answer, Holding):
                if ahead.started:  # its record says running: it never will
                    await self._record.close_unrun(
                        lock_name,
                        descriptor.target,
                        instant,
                        token=ahead.answer.fence,
                        verdict=Verdict.EXPIRED,
                        error=TOO_LATE_FOR_A_WORKER,
                    )
                await self._holdings.release_holding(ahead.answer)
            return self._result(Verdict.TOO_LATE, descriptor, instant, claim_seconds=claim.seconds)
        return await self._run_claimed(
            descriptor,
            lock_name,
            instant,
            body,
            ahead=claim.task_lock,
            claim_seconds=claim.seconds,
        )

    async def _run_claimed(
        self,
        descriptor: ScheduledDescriptor,
        lock_name: str,
        instant: datetime,
        body: Body,
        *,
        ahead: TaskLockAhead | None = None,
        claim_seconds: float | None = None,
    ) -> FireResult:
        """Steps 3 to 7 for a fire that is this node's (claimed, or `fixed_delay`).

        `ahead` is the task lock when it was taken with the claim (`claim_fires`).
        `claim_seconds` goes into every result built here, rather than into a copy of
        it: `dataclasses.replace` of a result, twice per won fire, was 7 % of a
        winning MySQL node's CPU (issue 12).
        """
        target = descriptor.target
        ttl = _lock_ttl(descriptor)
        holding = ahead.answer if ahead is not None else await self._acquire(lock_name, ttl)
        if isinstance(holding, LockBackendError):
            err = holding
            logger.warning(
                "%s: fire %s skipped: the task lock failed: %s", target, _at(instant), err
            )
            await self._record.skip(lock_name, target, instant, f"the lock backend failed: {err}")
            return self._result(
                Verdict.BACKEND_ERROR,
                descriptor,
                instant,
                error=str(err),
                claim_seconds=claim_seconds,
            )
        if holding is None:
            why = self._lock_holders.why_held(lock_name, target)
            logger.info("%s: fire %s skipped: %s", target, _at(instant), why)
            await self._record.skip(lock_name, target, instant, why)
            return self._result(
                Verdict.OVERLAPPING, descriptor, instant, claim_seconds=claim_seconds
            )
        token = holding.fence
        self._lock_holders.note(lock_name, target)
        lost = threading.Event()
        keepalive = self._keep_alive(holding, ttl, lost, f"{target} @ {_at(instant)}")
        adopted: tuple[FireResult, ...] = ()
        try:
            if ahead is not None and ahead.started:
                # Started with its claim, where the task had no running record: nothing
                # to adopt. Its pre-body check closes the record if the lock was lost.
                outcome = await self._execute(
                    descriptor,
                    instant,
                    body,
                    holding=holding,
                    lost=lost,
                    started_ahead=True,
                    claim_seconds=claim_seconds,
                )
            else:
                adopted = await self._adopt_or_expire(descriptor, instant, body, holding, lost)
                if not await self._still_held(holding, lost):
                    await self._record.skip(
                        lock_name,
                        target,
                        instant,
                        f"the task lock {lock_name!r} was lost before it ran",
                    )
                    outcome = self._result(
                        Verdict.LOCK_LOST,
                        descriptor,
                        instant,
                        token=token,
                        lost=True,
                        claim_seconds=claim_seconds,
                    )
                else:
                    outcome = await self._execute(
                        descriptor,
                        instant,
                        body,
                        holding=holding,
                        lost=lost,
                        claim_seconds=claim_seconds,
                    )
        finally:
            if keepalive is not None:
                await keepalive.stop()
            self._lock_holders.forget(lock_name, target)
            await self._holdings.release_holding(holding)
        if holding.lost and not outcome.lost:
            # A session backend may learn only at the release that its session ended
            # while the body ran (a node paused inside a short body): another node may
            # have held the lock meanwhile, so the run was not exclusive.
            logger.error(
                "%s: fire %s: the task lock %r was found lost at its release; another "
                "node may have run meanwhile",
                target,
                _at(instant),
                lock_name,
            )
            outcome = replace(outcome, lost=True)
        return replace(outcome, adopted=adopted) if adopted else outcome

    # -- steps ------------------------------------------------------------------------

    async def _acquire(self, lock_name: str, ttl: float) -> Holding | LockBackendError | None:
        """The task lock: the holding, None when held, or the backend's error."""
        try:
            return await self._holdings.acquire(lock_name, ttl, fenced=self._capabilities.fenced)
        except LockBackendError as err:
            return err

    def _result(
        self,
        verdict: Verdict,
        descriptor: ScheduledDescriptor,
        instant: datetime,
        *,
        attempt: int | None = None,
        token: int | None = None,
        started_at: datetime | None = None,
        ended_at: datetime | None = None,
        lost: bool = False,
        fenced: bool = False,
        error: str | None = None,
        claim_seconds: float | None = None,
        adoption: bool = False,
    ) -> FireResult:
        """This node's result for the fire of `descriptor` at `instant`."""
        return FireResult(
            Fire.at(descriptor, instant),
            self._node,
            verdict,
            attempt=attempt,
            token=token,
            started_at=started_at,
            ended_at=ended_at,
            lost=lost,
            fenced=fenced,
            error=error,
            claim_seconds=claim_seconds,
            adoption=adoption,
        )

    def _too_late(self, target: str, instant: datetime) -> float | None:
        """Seconds late when beyond grace (logged), else None."""
        lateness = (self._clock() - instant).total_seconds()
        if lateness <= self._grace:
            return None
        logger.warning(
            "%s: fire %s skipped: %.3fs late, beyond the grace of %gs",
            target,
            _at(instant),
            lateness,
            self._grace,
        )
        return lateness

    async def _skip_if_too_late(
        self,
        lock_name: str,
        target: str,
        instant: datetime,
        *,
        patience: float | None = None,
    ) -> bool:
        """Record the fire as skipped when it is beyond grace; True when it was."""
        lateness = self._too_late(target, instant)
        if lateness is None:
            return False
        reason = f"{lateness:.3f}s late, beyond the grace of {self._grace:g}s"
        await self._record.skip(lock_name, target, instant, reason, patience=patience)
        return True

    async def _claim(
        self, target: str, lock_name: str, instant: datetime
    ) -> tuple[Verdict, str | None]:
        """Claim the fire: SUCCEEDED when won, else the status to return; and why not."""
        [answer] = await self._claim_all([(target, lock_name, instant)])
        return answer

    async def _claim_all(
        self,
        fires: Sequence[tuple[str, str, datetime]],
        *,
        patience: float | None = None,
    ) -> list[tuple[Verdict, str | None]]:
        """Claim each `(target, lock name, instant)`: SUCCEEDED when won, else the status,
        each with the reason a fire not claimed gets in its result (None when won or
        claimed elsewhere).

        `patience` bounds each skip record's retries (see `claim_fires`).
        """
        now = self._clock()
        windows = [
            claim_seconds(instant, now, grace=self._grace, clock_skew=self._clock_skew)
            for _, _, instant in fires
        ]
        requests = [
            (claim_name(target, lock_name, instant), seconds)
            for (target, lock_name, instant), seconds in zip(fires, windows, strict=True)
            if seconds > 0
        ]
        answers = iter(await self._send_claims(requests))
        verdicts: list[tuple[Verdict, str | None]] = []
        for (target, lock_name, instant), seconds in zip(fires, windows, strict=True):
            if seconds <= 0:  # grace ran out between the check and now (clock_skew == 0)
                reason = "the grace ran out before it could be claimed"
                await self._record.skip(lock_name, target, instant, reason, patience=patience)
                verdicts.append((Verdict.TOO_LATE, reason))
                continue
            answer = next(answers)
            if isinstance(answer, LockBackendError):
                logger.warning(
                    "%s: fire %s skipped: its claim failed: %s", target, _at(instant), answer
                )
                # Harmless if another node runs it: a start replaces a skip.
                reason = f"the lock backend failed: {answer}"
                await self._record.skip(lock_name, target, instant, reason, patience=patience)
                verdicts.append((Verdict.BACKEND_ERROR, reason))
            elif not answer:
                if logger.isEnabledFor(logging.DEBUG):  # the common verdict: no isoformat
                    logger.debug("%s: fire %s is claimed elsewhere", target, _at(instant))
                verdicts.append((Verdict.CLAIMED_ELSEWHERE, None))
            else:
                verdicts.append((Verdict.SUCCEEDED, None))
        return verdicts

    async def _send_claims(
        self, requests: Sequence[tuple[str, float]]
    ) -> list[bool | LockBackendError]:
        """Each claim's answer: one batch where the backend takes them, else one by one."""
        if len(requests) > 1 and self._batch_claims is not None:
            return await self._batch_claims.try_claim_many(requests)
        answers: list[bool | LockBackendError] = []
        for name, seconds in requests:
            try:
                answers.append(await self._claims.try_claim(name, seconds))
            except LockBackendError as err:
                answers.append(err)
        return answers

    def _keep_alive(
        self, holding: Holding, ttl: float, lost: threading.Event, label: str
    ) -> AsyncKeepAlive | None:
        if not self._capabilities.renewable:
            return None
        return AsyncKeepAlive(
            self._holdings,
            holding,
            ttl,
            interval=self._keepalive_interval,
            lost=lost,
            label=label,
        ).start()

    async def _still_held(
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
        if await self._lease_ahead(holding, before_body=before_body):
            return True
        lost.set()
        logger.error(
            "the task lock %r lapsed or could not be confirmed before the body could "
            "start (the node stalled for most of its lease)",
            holding.name,
        )
        return False

    async def _lease_ahead(self, holding: Holding, *, before_body: bool) -> bool:
        """Whether the body has its margin of lease ahead, renewing once when short.

        A renewal vouches for the lease from when it was sent (the local expiry is
        taken before the round trip), so a reply that came late may leave less than
        the margin, or nothing: the server may have freed the lease before the reply
        arrived, and another node taken it. The margin is checked again after it.
        """
        margin = holding.ttl_seconds * BODY_LEASE_MARGIN
        ask_the_session = before_body and self._capabilities.session_scoped
        if holding.remaining() >= margin and not ask_the_session:
            return True
        if self._capabilities.renewable:
            # A session lock has no lease to count on: it ends with its session, at any
            # moment, and only the server knows (the chaos checker, seed 120401 on
            # MySQL: a connection reset between the acquisition and the body freed the
            # lock, another node took it, and the body ran anyway). Its renewal asks,
            # once, just before the body (the earlier checks count on the lease).
            renewed = await self._holdings.renew_holding(holding, holding.ttl_seconds)
            return renewed and holding.remaining() >= margin
        return not holding.lapsed()  # nothing can refresh it: what is left is all there is

    async def _adopt_or_expire(
        self,
        descriptor: ScheduledDescriptor,
        instant: datetime,
        body: Body,
        holding: Holding,
        lost: threading.Event,
    ) -> tuple[FireResult, ...]:
        """Adopt the newest died run within grace; close older ones as expired.

        A fire this node finished but could not record is never adopted: it ran.
        """
        if self._history is None:
            return ()
        target, lock = descriptor.target, holding.name
        token = holding.fence
        try:
            unfinished = await off_loop(self._history.unfinished, target, lock=lock)
            died = [
                r
                for r in unfinished
                if r.instant != instant and not self._record.finished_here(lock, target, r.instant)
            ]
        except HistoryError as err:
            logger.warning("%s: the run history is unavailable, nothing adopted: %s", target, err)
            return ()
        if not died:
            return ()
        now = self._clock()
        within = [r for r in died if (now - r.instant).total_seconds() <= self._grace]
        adopt = within[-1] if within else None
        outcomes: list[FireResult] = []
        for record in died:
            if record is adopt:
                continue
            reason = (
                f"attempt {record.attempt} on {record.node} stopped holding the task lock "
                "without finishing, and no node adopted it within grace"
            )
            logger.warning("%s: fire %s expired: %s", target, _at(record.instant), reason)
            await self._record.close_unrun(
                lock, target, record.instant, token=token, verdict=Verdict.EXPIRED, error=reason
            )
            outcomes.append(
                self._result(
                    Verdict.EXPIRED,
                    descriptor,
                    record.instant,
                    attempt=record.attempt,
                    token=token,
                    adoption=True,
                )
            )
        if adopt is not None and await self._still_held(holding, lost):
            logger.warning(
                "%s: adopting fire %s: attempt %d on %s stopped holding the task lock",
                target,
                _at(adopt.instant),
                adopt.attempt,
                adopt.node,
            )
            adopted = await self._execute(
                descriptor,
                adopt.instant,
                body,
                holding=holding,
                lost=lost,
                unrecorded_attempt=adopt.attempt + 1,
            )
            outcomes.append(replace(adopted, adoption=True))
        return tuple(outcomes)

    async def _execute(
        self,
        descriptor: ScheduledDescriptor,
        instant: datetime,
        body: Body,
        *,
        holding: Holding | None,
        lost: threading.Event,
        recorded: bool = True,
        unrecorded_attempt: int = 1,
        started_ahead: bool = False,
        claim_seconds: float | None = None,
    ) -> FireResult:
        """Run the body once for `instant`, between the history's start and finish.

        `holding` is the task lock's. A lease that lapsed while the body ran (the node
        stalled past it, renewals failed) marks the run lost at its end, even when no
        renewal got to say so: another node may have run meanwhile.
        `unrecorded_attempt` is the attempt the body is told when the history cannot
        record the start: an adoption is attempt `n + 1` even then.
        `started_ahead`: the history has this run started, attempt 1, with its claim
        (`claim_fires`). `claim_seconds`: the claim's round trip, for the result.
        """
        target = descriptor.target
        # Only a locked task's fires are recorded: the lock name is half of their key.
        lock = descriptor.lock_name if recorded else None
        token = None if holding is None else holding.fence
        attempt = 1
        start_recorded = started_ahead
        if lock is not None and self._history is not None and not started_ahead:
            try:
                started = await off_loop(
                    self._history.start,
                    target,
                    instant,
                    lock=lock,
                    node=self._node,
                    token=token,
                    at=self._clock(),
                )
            except HistoryError as err:
                logger.warning(
                    "%s: fire %s runs unrecorded (recorded whole at its end): %s",
                    target,
                    _at(instant),
                    err,
                )
                started = unrecorded_attempt
            else:
                start_recorded = started is not None
            if started is None:
                logger.info(
                    "%s: fire %s not run: the history has it finished or owned by a newer attempt",
                    target,
                    _at(instant),
                )
                return self._result(
                    Verdict.ALREADY_RECORDED,
                    descriptor,
                    instant,
                    token=token,
                    claim_seconds=claim_seconds,
                )
            attempt = started
        if holding is not None and not await self._still_held(holding, lost, before_body=True):
            reason = "the task lock lapsed or was lost before the body started"
            if lock is not None and start_recorded:
                await self._record.close_unrun(
                    lock, target, instant, token=token, verdict=Verdict.LOCK_LOST, error=reason
                )
            elif lock is not None:  # nothing recorded: nobody ran it
                await self._record.skip(lock, target, instant, reason)
            return self._result(
                Verdict.LOCK_LOST,
                descriptor,
                instant,
                attempt=attempt,
                token=token,
                lost=True,
                error=reason,
                claim_seconds=claim_seconds,
            )
        context = FireContext(
            target, instant, attempt, token, self._node, descriptor.lock_name, lost
        )
        verdict = Verdict.FAILED
        error: str | None = "interrupted: the body did not return"
        end_recorded: Recorded | None = None
        returned = False  # or raised an Exception: not interrupted
        started_at = self._clock()
        try:
            with entered(context):
                await body()
            verdict, error, returned = Verdict.SUCCEEDED, None, True
        except Exception as err:
            returned = True
            error = f"{type(err).__name__}: {err}"
            logger.exception(
                "%s: the task raised (fire %s, attempt %d)", target, _at(instant), attempt
            )
        finally:
            ended_at = self._clock()
            if holding is not None and not lost.is_set() and (holding.lost or holding.lapsed()):
                lost.set()
                logger.error(
                    "%s: fire %s: the task lock %r lapsed or was lost while the body ran; "
                    "another node may have run meanwhile",
                    target,
                    _at(instant),
                    holding.name,
                )
            if lock is not None:
                run = UnrecordedFinish(
                    lock,
                    target,
                    instant,
                    self._node,
                    token,
                    closing_state(verdict),
                    error,
                    started_at,
                    ended_at,
                )
                end_recorded = await self._record.end_of_run(
                    run, started=start_recorded, finished=returned
                )
        return self._result(
            verdict,
            descriptor,
            instant,
            attempt=attempt,
            token=token,
            started_at=started_at,
            ended_at=ended_at,
            lost=lost.is_set(),
            fenced=end_recorded is Recorded.FENCED,
            error=error,
            claim_seconds=claim_seconds,
        )


def _lock_ttl(descriptor: ScheduledDescriptor) -> float:
    return descriptor.lock_ttl if descriptor.lock_ttl is not None else DEFAULT_LOCK_TTL_SECONDS


def _at(instant: datetime) -> str:
    return instant.isoformat()
