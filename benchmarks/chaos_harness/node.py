"""One chaos node: `python node.py run|tick NAME`, the real hosts with two chaos seams.

It boots exactly as `firefly-scheduling run` / `tick` do (`prepare_host`,
`build_runtime`, `ResidentHost` / `TickHost`) on `chaos_harness.tasks` and
`chaos_harness.policy_tasks`, and adds,
through the hosts' public seams only:

* **a clock offset**: the runtime's wall clock (`TaskRuntime.now`, the `Clock` of
  `TickHost`) reads the real time plus the offset in this node's control file, which
  the nemesis rewrites (±2 s);
  and a resident node's APScheduler reads the same clock (`scheduler_clock`), as a
  real node whose system clock is off fires its jobs by that clock;
* **failing history writes**: the fire runner gets the configured history wrapped
  (`FlakyHistory`) so that its writes raise `HistoryError` while the control file
  says so: every write (`all`), the `start` of runs and retries (failing at once,
  after a hang, or after a hang in which it was written: a lost reply), or the end of runs
  (`finish`, `record_run`). The node's first such write after each injection fails
  even when the window is short (every injected fault is felt, not only those that
  meet a write); each failure is stamped on the evidence log (`history_refused`);
* **claim stamps**: every fire claim the runner wins is stamped on the evidence log
  (`claim_stamps`), and every waiting slot it holds (`slot_stamps`);
* **an observer** appending every fire's verdict to the evidence log.

Unless `FIREFLY_CHAOS_STEERING=0`, the node steers from the control store of its
setup (its run's own table on a shared SQL server, `control_store`), as `run` and
`tick` do (one client, through the node's proxy): its fires
read the pauses before they start, and its host runs the triggers and backfills.

The control file (`FIREFLY_CHAOS_CONTROL`, JSON `{"offset": s, "history": {writes:
{"at": ns, "until": ns, "mode": "fail"|"hang"|"late", "hang": s}}}`, monotonic
stamps) is re-read every 50 ms by a daemon thread.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TypeVar, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import apscheduler.schedulers.base as apscheduler_base

from chaos_harness.claim_stamps import stamping_claims
from chaos_harness.control_store import run_control_store
from chaos_harness.evidence import EvidenceLog
from chaos_harness.slot_stamps import stamping_slots
from firefly_scheduling.cli.host_options import configure_logging, prepare_host
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.atomic import (
    AsyncCallerTransaction,
    CallerTransaction,
    RecordReadingHistory,
    TransactionalHistory,
)
from firefly_scheduling.fires.outcome import FireResult
from firefly_scheduling.fires.pausing import PauseReader
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history.port import (
    SCHEDULED,
    BufferingHistory,
    HistoryError,
    Recorded,
    RetryStartingHistory,
    RunHistory,
    RunRecord,
    RunState,
)
from firefly_scheduling.history.selection import resolve_history
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.runtime.clock import SystemClock
from firefly_scheduling.hosts.runtime.shutdown import (
    StopRequest,
    ignore_stop_signals,
    stop_on_signals,
)
from firefly_scheduling.hosts.runtime.task_runtime import Lazy
from firefly_scheduling.hosts.tick import TickHost

_T = TypeVar("_T")

#: The task modules: the task mix and the fire policies' tasks, or (an effects
#: setup) the modules `FIREFLY_CHAOS_APP` names, comma-separated.
APPS = tuple(
    os.environ.get("FIREFLY_CHAOS_APP", "chaos_harness.tasks,chaos_harness.policy_tasks").split(",")
)
BENCHMARKS = Path(__file__).resolve().parent.parent
POLL_SECONDS = 0.05
GRACE_PERIOD = 10.0


@dataclass(frozen=True)
class WriteFault:
    """A fault of some history writes: injected `at`, in force `until` (monotonic ns).

    `mode`: `fail` at once; `hang` for `hang` seconds, then fail (a timeout); `late`:
    hang, let the write through, then fail (the reply lost).
    """

    at: int = 0
    until: int = 0
    mode: str = "fail"
    hang: float = 0.0

    @property
    def in_force(self) -> bool:
        return time.monotonic_ns() < self.until


#: Which faults hit each write (by the `writes` the nemesis names).
FAULTS_OF = {
    "start": ("all", "start"),
    "finish": ("all", "finish"),
    "record_run": ("all", "finish"),
    "skip": ("all",),
    "buffer": ("all",),
}


@dataclass
class Control:
    """What the nemesis currently asks of this node, refreshed from its control file."""

    path: Path
    offset: float = 0.0
    history: dict[str, WriteFault] = field(default_factory=dict)

    def refresh(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return  # absent, or being replaced: keep the last values
        self.offset = float(data.get("offset", 0.0))
        self.history = {
            writes: WriteFault(
                int(fault["at"]), int(fault["until"]), str(fault["mode"]), float(fault["hang"])
            )
            for writes, fault in data.get("history", {}).items()
        }

    def watch(self) -> None:
        def loop() -> None:
            while True:
                self.refresh()
                time.sleep(POLL_SECONDS)

        self.refresh()
        threading.Thread(target=loop, name="chaos-control", daemon=True).start()

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.offset)


def scheduler_clock(control: Control) -> None:
    """Make APScheduler's notion of now this node's offset clock.

    Without it the offset moved only the runtime's clock: a node 2 s behind had its
    jobs started on the real second and named the previous instant, a skew no real
    node has (its scheduler and its runtime read one system clock).
    """

    class NodeDatetime(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> datetime:  # type: ignore[override]
            return control.now().astimezone(tz)

    apscheduler_base.datetime = NodeDatetime


class OffsetClock(SystemClock):
    """`TickHost`'s clock seam: the real time plus the node's current offset."""

    def __init__(self, control: Control) -> None:
        super().__init__()
        self._control = control

    def now(self) -> datetime:
        return self._control.now()


class FlakyHistory:
    """The configured history whose writes fail while the nemesis says so (`WriteFault`)."""

    def __init__(self, inner: RunHistory, control: Control, evidence: EvidenceLog) -> None:
        self._inner = inner
        self._control = control
        self._evidence = evidence
        # A fault before this process began is not its own to feel at once.
        self._felt = {writes: fault.at for writes, fault in control.history.items()}
        self._mutex = threading.Lock()

    def _fault(self, write: str) -> WriteFault | None:
        """The fault this `write` meets now, if any (the first write after an injection
        meets it even when its window has passed)."""
        faults = self._control.history
        with self._mutex:
            for writes in FAULTS_OF[write]:
                fault = faults.get(writes)
                if fault is None:
                    continue
                if fault.in_force or fault.at > self._felt.get(writes, 0):
                    self._felt[writes] = max(self._felt.get(writes, 0), fault.at)
                    return fault
        return None

    def _through(
        self, write: str, task: str, instants: Sequence[datetime], call: Callable[[], _T]
    ) -> _T:
        """`call()`, the write of `task`'s `instants`, unless a fault stops it (see
        `WriteFault`); a stopped write is stamped for each of them."""
        fault = self._fault(write)
        if fault is None:
            return call()
        if fault.hang:
            time.sleep(fault.hang)
        applied = fault.mode == "late"
        if applied:
            call()
        for instant in instants:
            self._refused(write, task, instant, injected=True, applied=applied)
        if applied:
            raise HistoryError(f"chaos: injected lost reply of history.{write}")
        raise HistoryError(f"chaos: injected failure of history.{write} ({fault.mode})")

    def _refused(
        self,
        write: str,
        task: str,
        instant: datetime,
        *,
        injected: bool,
        applied: bool | None = False,
    ) -> None:
        """Log a failed write: injected here, or the real store's (SQLite contention).

        `applied`: the write was made and only its reply lost (`late`); None: unknown.
        """
        self._evidence.append(
            "history_refused",
            write=write,
            target=task,
            instant=str(instant),
            injected=injected,
            applied=applied,
        )

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
        def write() -> int | None:
            try:
                return self._inner.start(
                    task,
                    instant,
                    lock=lock,
                    node=node,
                    token=token,
                    at=at,
                    trigger=trigger,
                    requested_by=requested_by,
                )
            except HistoryError:
                # The real store's failure (SQLite contention, a cut connection): whether
                # the write was made is unknown, so it never excuses a repeated attempt.
                self._refused("start", task, instant, injected=False, applied=None)
                raise

        return self._through("start", task, [instant], write)

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
        return self._through(
            "finish",
            task,
            [instant],
            lambda: self._inner.finish(
                task, instant, lock=lock, token=token, state=state, error=error, at=at
            ),
        )

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
        return self._through(
            "record_run",
            task,
            [instant],
            lambda: self._inner.record_run(
                task,
                instant,
                lock=lock,
                node=node,
                token=token,
                state=state,
                error=error,
                started_at=started_at,
                ended_at=ended_at,
                trigger=trigger,
                requested_by=requested_by,
            ),
        )

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
        def write() -> bool:
            try:
                return self._inner.skip(
                    task,
                    instant,
                    lock=lock,
                    node=node,
                    reason=reason,
                    at=at,
                    trigger=trigger,
                    requested_by=requested_by,
                )
            except HistoryError:
                self._refused("skip", task, instant, injected=False)
                raise

        return self._through("skip", task, [instant], write)

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
        """One write on the store; a refusal is logged for every instant it carried."""

        def write() -> int:
            try:
                return self._inner.skip_many(
                    task, instants, lock=lock, node=node, reason=reason, at=at
                )
            except HistoryError:
                for instant in instants:
                    self._refused("skip", task, instant, injected=False)
                raise

        return self._through("skip", task, instants, write) if instants else write()

    def record_of(self, task: str, instant: datetime, *, lock: str) -> RunRecord | None:
        """The read an `atomic` run's end begins with: a fault of the end's writes hits
        it as it hits `record_run`, which follows it where the success did not commit.
        A history that reads no record answers None: `record_run` decides alone."""
        inner = self._inner
        if not isinstance(inner, RecordReadingHistory):
            return None
        return self._through(
            "record_run", task, [instant], lambda: inner.record_of(task, instant, lock=lock)
        )

    def caller_transaction(
        self, connection: object | None, *, using: str | None
    ) -> CallerTransaction | AsyncCallerTransaction:
        """The configured history's, unfaulted: the write goes through the task's own
        transaction, which the nemesis faults through the proxy and the session."""
        if not isinstance(self._inner, TransactionalHistory):
            raise ConfigurationError(
                f"the chaos node's history ({type(self._inner).__qualname__}) cannot write "
                "through the task's connection"
            )
        return self._inner.caller_transaction(connection, using=using)

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
        """A retry's conditional start: a `start` as far as the faults go. Without it
        the runner would take this history for one that cannot start retries, and run
        every retry unrecorded."""
        return self._through(
            "start",
            task,
            [instant],
            lambda: cast(RetryStartingHistory, self._inner).start_retry(
                task,
                instant,
                lock=lock,
                node=node,
                token=token,
                after_attempt=after_attempt,
                note=note,
                at=at,
            ),
        )

    def buffer(
        self, task: str, instant: datetime, *, lock: str, node: str, reason: str, at: datetime
    ) -> bool:
        """A buffered fire's mark (`all` faults)."""
        return self._through(
            "buffer",
            task,
            [instant],
            lambda: cast(BufferingHistory, self._inner).buffer(
                task, instant, lock=lock, node=node, reason=reason, at=at
            ),
        )

    def unfinished(self, task: str, *, lock: str) -> list[RunRecord]:
        return self._inner.unfinished(task, lock=lock)

    def runs(
        self, task: str | None = None, limit: int = 20, *, lock: str | None = None
    ) -> list[RunRecord]:
        return self._inner.runs(task, limit, lock=lock)

    def last_success(self, task: str, *, lock: str) -> RunRecord | None:
        return self._inner.last_success(task, lock=lock)

    def failures_since(self, since: datetime) -> list[RunRecord]:
        return self._inner.failures_since(since)

    def recorded_instants(
        self,
        task: str,
        *,
        lock: str,
        after: datetime,
        until: datetime,
        states: Set[RunState] | None = None,
    ) -> set[datetime]:
        return self._inner.recorded_instants(
            task, lock=lock, after=after, until=until, states=states
        )

    def records_between(
        self, task: str, *, lock: str, after: datetime, until: datetime, states: Set[RunState]
    ) -> list[RunRecord]:
        return self._inner.records_between(task, lock=lock, after=after, until=until, states=states)

    def expire_dead(self, started_before: datetime, *, at: datetime) -> int:
        return self._inner.expire_dead(started_before, at=at)

    def prune(self, before: datetime) -> int:
        return self._inner.prune(before)

    def close(self) -> None:
        self._inner.close()


class EvidenceObserver:
    """Appends the verdict of every fire this node handled (adoptions included)."""

    def __init__(self, evidence: EvidenceLog, node: str) -> None:
        self._evidence = evidence
        self._node = node

    def fire_finished(self, result: FireResult) -> None:
        self._evidence.append(
            "outcome",
            node=self._node,
            target=result.fire.target,
            instant=result.fire.instant.isoformat(),
            verdict=result.verdict.name,
            adoption=result.adoption,
            attempt=result.attempt,
            token=result.token,
            lost=result.lost,
            fenced=result.fenced,
        )


def main(host: str, name: str) -> int:
    evidence = EvidenceLog(Path(os.environ["FIREFLY_CHAOS_EVIDENCE"]))
    control = Control(Path(os.environ["FIREFLY_CHAOS_CONTROL"]))
    control.watch()
    with stop_on_signals(StopRequest()) as stop:
        settings, descriptors = prepare_host(APPS, None, (BENCHMARKS,), None, name)
        configure_logging("WARNING", name)
        runtime = build_runtime(
            descriptors, settings, host=host, observers=(EvidenceObserver(evidence, name),)
        )
        runtime.fire_runner.get().close()  # replaced by one whose history can fail
        history = resolve_history(settings)
        flaky = None if history is None else FlakyHistory(history, control, evidence)
        steering = (
            run_control_store(settings, os.environ["FIREFLY_CHAOS_PREFIX"]) if _steering() else None
        )
        runtime.fire_runner = Lazy.of(
            FireRunner(
                stamping_slots(stamping_claims(runtime.lock.get(), evidence), evidence),
                history=flaky,
                clock=runtime.wall_now,
                grace=settings.grace,
                clock_skew=settings.clock_skew,
                node=name,
                owns_history=True,
                pauses=None if steering is None else PauseReader(steering),
            )
        )
        evidence.append("boot", node=name, host=host)
        Path(os.environ["FIREFLY_CHAOS_CONTROL"]).with_suffix(".booted").write_text(
            str(os.getpid())
        )
        if host == "run":
            runtime.now = control.now
            scheduler_clock(control)
            resident = ResidentHost(
                descriptors, runtime, grace_period=GRACE_PERIOD, stop=stop, control=steering
            )
            status = resident.run_until_stopped(handle_signals=False)
        else:
            ticker = TickHost(
                descriptors,
                runtime,
                clock=OffsetClock(control),
                grace_period=GRACE_PERIOD,
                stop=stop,
                control=steering,
            )
            report = ticker.run()
            runtime.close()
            if steering is not None:
                steering.close()
            print(report.summary(), flush=True)
            status = 0
    ignore_stop_signals()
    evidence.append("exit", node=name, host=host)
    logging.shutdown()
    return status


def _steering() -> bool:
    return os.environ.get("FIREFLY_CHAOS_STEERING", "1") != "0"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
