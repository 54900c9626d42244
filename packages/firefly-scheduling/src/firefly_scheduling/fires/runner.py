# Generated from runner_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`FireRunner`: run one fire of a task at most once across the fleet, and record it.

Written once, for asyncio, in `fires/runner_async.py`; the synchronous flavour in
`fires/runner.py` is generated from it by `tools/async_to_sync.py`, so the rules
below bind both alike. The asyncio flavour awaits the lock and the body on the
caller's event loop and calls the (synchronous) run history in a worker thread.

`run(fire, body)` is the one place where a host's fire meets the lock and the
history. The runner holds no rule of its own: it builds the stages (`fires`'s package
doc) and hands the fire to the first; each stage hands it on to the next, and none
hands it back. For a locked task:

1. decide (`fires.deciding`): grace, then the policy before the claim: too late, or
   skipped, is recorded;
2. claim (`fires.claims`, cron and `fixed_rate` tasks): lost, another node has the
   fire;
3. lock (`fires.locking`): the task lock, fenced where the backend can; held, the
   policy skips the fire; it is renewed while bodies run, and released once the
   locked run is over;
4. the locked run (`fires.locked_run`): adoption: the newest died run within grace
   runs again here (`attempt + 1`, the newer token), older ones are closed as
   expired; at most one extra run;
5. start (`fires.starting`): the pauses read from the control store (a paused
   fire is skipped, recorded), then the run's start recorded (the history may
   refuse it: the fire is finished, or owned by a newer attempt);
6. run (`fires.running`): the lease checked once more, the body;
7. record (`fires.recording`): the run's end recorded, and the fire's result.

The claim is kept for its window.

It never runs a body unlocked: a `LockBackendError` skips the fire (logged, and
recorded). Exceptions from the body are logged and never propagate; only
`KeyboardInterrupt`/`SystemExit` do, after the fire is recorded as failed and the
lock released. History failures never stop a run: the lock keeps a task from
running twice, the history records what ran, eventually.

A host that claims fires together (`claim_fires`, the resident host) sends the
claims of one instant as one request where the backend can, then the task locks of
the fires it won, then their starts, each as one request where the backend and the
history can: a won fire's worker then sends neither. docs/guarantees.md has the
round trips a fire costs on each backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.fires.claims import FireClaimer
from firefly_scheduling.fires.deciding import TOO_LATE_FOR_A_WORKER, FireDecider
from firefly_scheduling.fires.history_calls import off_loop
from firefly_scheduling.fires.locked_run import LockedRun
from firefly_scheduling.fires.locking import TaskLocker
from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, FireResult
from firefly_scheduling.fires.pausing import PauseReader, pause_reader
from firefly_scheduling.fires.policy import DEFAULT_POLICY, FirePolicy
from firefly_scheduling.fires.recording import RunRecorder
from firefly_scheduling.fires.running import Body, BodyRunner
from firefly_scheduling.fires.starting import RunStarter
from firefly_scheduling.history.port import RunHistory
from firefly_scheduling.history.selection import resolve_history
from firefly_scheduling.locks.port import DistributedLock, capabilities_of
from firefly_scheduling.locks.port_holdings import claiming_lock, holding_lock
from firefly_scheduling.settings import (
    DEFAULT_CLOCK_SKEW_SECONDS,
    DEFAULT_GRACE_SECONDS,
    Settings,
    default_node_name,
)
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

__all__ = ["TOO_LATE_FOR_A_WORKER", "FireRunner", "WallClock", "utc_now"]


#: Where the runner reads the time: an aware datetime. Tests inject skewed clocks here.
WallClock = Callable[[], datetime]


def utc_now() -> datetime:
    """The system wall clock, aware, in UTC."""
    return datetime.now(UTC)


class FireRunner:
    """Runs fires against one lock and one (optional) history; one per host, thread-safe.

    * `grace`: seconds a fire may be late and still be claimed or adopted.
    * `clock_skew`: the largest clock difference between two nodes the claims
      tolerate (added to the claim's window).
    * `clock`: the wall clock, aware UTC; inject an offset to simulate a skewed node.
    * `node`: this process's name in the history (default `hostname-pid`).
    * `keepalive_interval`: seconds between renewals (default `lock_ttl / 3`).
    * `policy`: what the stages ask about each fire (`fires.policy`; by default
      today's behaviour, `DEFAULT_POLICY`).
    * `pauses`: where the start stage reads the pauses (`fires.pausing`); None: no
      control store, no fire is paused.

    `close()` releases the claims a session backend still holds and closes a history
    and a pause reader built by `from_settings`.
    """

    def __init__(
        self,
        lock: DistributedLock,
        *,
        history: RunHistory | None = None,
        clock: WallClock = utc_now,
        grace: float = DEFAULT_GRACE_SECONDS,
        clock_skew: float = DEFAULT_CLOCK_SKEW_SECONDS,
        node: str | None = None,
        keepalive_interval: float | None = None,
        owns_history: bool = False,
        policy: FirePolicy = DEFAULT_POLICY,
        pauses: PauseReader | None = None,
    ) -> None:
        if not grace > 0:
            raise ValueError(f"grace must be > 0 seconds, got {grace!r}")
        if not clock_skew >= 0:
            raise ValueError(f"clock_skew must be >= 0 seconds, got {clock_skew!r}")
        grace, clock_skew = float(grace), float(clock_skew)
        self._history = history
        self._node = node = node or default_node_name()
        self._owns_history = owns_history
        self._pauses = pauses
        holdings = holding_lock(lock)
        capabilities = capabilities_of(lock)
        record = self._record = RunRecorder(
            history, clock=clock, node=node, grace=grace, clock_skew=clock_skew, policy=policy
        )
        body_runner = BodyRunner(
            holdings, capabilities, record=record, policy=policy, clock=clock, node=node
        )
        starter = RunStarter(
            body_runner,
            history,
            record=record,
            policy=policy,
            pauses=pauses,
            clock=clock,
            node=node,
        )
        locked_run = LockedRun(
            starter, body_runner, history, record=record, clock=clock, grace=grace, node=node
        )
        locker = TaskLocker(
            holdings,
            capabilities,
            locked_run,
            record=record,
            policy=policy,
            node=node,
            keepalive_interval=keepalive_interval,
        )
        claimer = FireClaimer(
            claiming_lock(lock),
            locker,
            record=record,
            clock=clock,
            grace=grace,
            clock_skew=clock_skew,
            node=node,
        )
        self._decide = FireDecider(
            claimer,
            locker,
            starter,
            holdings,
            record=record,
            policy=policy,
            clock=clock,
            grace=grace,
            node=node,
        )

    @classmethod
    def from_settings(
        cls,
        lock: DistributedLock,
        settings: Settings | None = None,
        *,
        clock: WallClock = utc_now,
        node: str | None = None,
        control: ControlStore | None = None,
    ) -> FireRunner:
        """A runner with the configured history, pauses, grace and clock-skew tolerance.

        `node` overrides `settings.node`. Raises `ConfigurationError` for a history
        or control store URL that cannot be used, so a host fails at boot rather
        than on a fire; without a durable control store it warns once, and never
        pauses (`fires.pausing.pause_reader`). `control`: the host's own control
        store, read for the pauses too (one client per host; its owner closes it);
        None: the configured one, built and closed by the runner.
        """
        settings = Settings.from_env() if settings is None else settings
        pauses = pause_reader(settings) if control is None else PauseReader(control)
        return cls(
            lock,
            pauses=pauses,
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

    def run(self, fire: Fire, body: Body, *, claim: ClaimOutcome | None = None) -> FireResult:
        """Run `fire` if it is this node's.

        `claim` is the fire's claim when `claim_fires` already took it: the runner
        then goes on from its verdict, without a round trip of its own.
        """
        self._record.retry_unrecorded()
        return self._decide.take(fire, body, claim)

    def claim_fires(self, batch: Sequence[Fire], *, task_locks: bool = True) -> list[ClaimOutcome]:
        """Claim several fires of locked recurring tasks together, ahead of their runs.

        The checks and records of `run` are the same, but the claims go to the backend
        as one batch where it takes batches (`FireDecider.claim_many`). Pass each
        outcome to `run(..., claim=)`: a won claim not run is a fire lost.
        `task_locks=False` claims the fires alone, without their task locks: for
        several fires of one task (a catch-up), run one after the other.
        """
        return self._decide.claim_many(batch, task_locks=task_locks)

    def recent_recorded_instants(
        self, descriptor: ScheduledDescriptor, limit: int
    ) -> list[datetime]:
        """The instants of the task's newest `limit` history records, newest first.

        Where a host that starts looks for the fires nobody ran; empty where nothing
        can be read (`RunRecorder.recent_instants`).
        """
        return self._record.recent_instants(descriptor, limit)

    def record_passed_over(self, fires: Sequence[Fire], reason: str) -> int:
        """Record fires of one task this node's host passed over as skipped, where
        nothing is recorded; how many were new.

        A host that never hands a fire to `run` (APScheduler coalescing due times, or
        dropping one while the job's previous run still goes, or a node back from an
        outage) says so here, so every fire ends up run or recorded with a reason.
        Harmless where another node ran the fire: a skip writes only where nothing is
        recorded, and a later `start` replaces it (`RunRecorder.passed_over`).
        """
        return self._record.passed_over(fires, reason)

    def close(self) -> None:
        """Close an owned history and pause reader; fire claims outlive the process by design."""
        self._record.retry_unrecorded(immediately=True)
        if self._pauses is not None:
            self._pauses.close()
        if self._owns_history and self._history is not None:
            off_loop(self._history.close)
