"""One chaos node: `python node.py run|tick NAME`, the real hosts with two chaos seams.

It boots exactly as `firefly-scheduling run` / `tick` do (`prepare_host`,
`build_runtime`, `ResidentHost` / `TickHost`) on `chaos_harness.tasks`, and adds,
through the hosts' public seams only:

* **a clock offset**: the runtime's wall clock (`TaskRuntime.now`, the `Clock` of
  `TickHost`) reads the real time plus the offset in this node's control file, which
  the nemesis rewrites (±2 s);
  and a resident node's APScheduler reads the same clock (`scheduler_clock`), as a
  real node whose system clock is off fires its jobs by that clock;
* **failing history writes**: the fire runner gets the configured history wrapped
  so that `start`, `finish` and `skip` raise `HistoryError` while the control file
  says so, and the node's first write after each injection fails even when the
  window is short (every injected fault is felt, not only those that meet a write);
* **an observer** appending every fire's verdict to the evidence log.

The control file (`FIREFLY_CHAOS_CONTROL`, JSON `{"offset": s, "history_fail_until":
monotonic ns}`) is re-read every 50 ms by a daemon thread.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import apscheduler.schedulers.base as apscheduler_base

from chaos_harness.evidence import EvidenceLog
from firefly_scheduling.cli.host_options import configure_logging, prepare_host
from firefly_scheduling.fires.execution import FireRunner
from firefly_scheduling.fires.outcome import FireResult
from firefly_scheduling.history.port import (
    HistoryError,
    Recorded,
    RunHistory,
    RunRecord,
    RunState,
)
from firefly_scheduling.history.selection import resolve_history
from firefly_scheduling.hosts.boot import build_runtime
from firefly_scheduling.hosts.clock import SystemClock
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime import Lazy
from firefly_scheduling.hosts.shutdown import StopRequest, ignore_stop_signals, stop_on_signals
from firefly_scheduling.hosts.tick import TickHost

APP = "chaos_harness.tasks"
BENCHMARKS = Path(__file__).resolve().parent.parent
POLL_SECONDS = 0.05
GRACE_PERIOD = 10.0


@dataclass
class Control:
    """What the nemesis currently asks of this node, refreshed from its control file."""

    path: Path
    offset: float = 0.0
    history_fail_until: int = 0
    history_fail_at: int = 0

    def refresh(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return  # absent, or being replaced: keep the last values
        self.offset = float(data.get("offset", 0.0))
        self.history_fail_until = int(data.get("history_fail_until", 0))
        self.history_fail_at = int(data.get("history_fail_at", 0))

    def watch(self) -> None:
        def loop() -> None:
            while True:
                self.refresh()
                time.sleep(POLL_SECONDS)

        self.refresh()
        threading.Thread(target=loop, name="chaos-control", daemon=True).start()

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.offset)

    @property
    def history_failing(self) -> bool:
        return time.monotonic_ns() < self.history_fail_until


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
    """The configured history whose writes fail while the nemesis says so."""

    def __init__(self, inner: RunHistory, control: Control, evidence: EvidenceLog) -> None:
        self._inner = inner
        self._control = control
        self._evidence = evidence
        self._felt = control.history_fail_at  # a fault before this process began is not its

    def _check(self, write: str, task: str, instant: datetime) -> None:
        injected_at = self._control.history_fail_at
        if self._control.history_failing or injected_at > self._felt:
            self._felt = max(self._felt, injected_at)
            self._refused(write, task, instant, injected=True)
            raise HistoryError(f"chaos: injected failure of history.{write}")

    def _refused(self, write: str, task: str, instant: datetime, *, injected: bool) -> None:
        """Log a failed write: injected here, or the real store's (SQLite contention)."""
        self._evidence.append(
            "history_refused", write=write, target=task, instant=str(instant), injected=injected
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
    ) -> int | None:
        self._check("start", task, instant)
        return self._inner.start(task, instant, lock=lock, node=node, token=token, at=at)

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
        self._check("finish", task, instant)
        return self._inner.finish(
            task, instant, lock=lock, token=token, state=state, error=error, at=at
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
    ) -> Recorded:
        self._check("finish", task, instant)
        return self._inner.record_run(
            task,
            instant,
            lock=lock,
            node=node,
            token=token,
            state=state,
            error=error,
            started_at=started_at,
            ended_at=ended_at,
        )

    def skip(
        self, task: str, instant: datetime, *, lock: str, node: str, reason: str, at: datetime
    ) -> bool:
        self._check("skip", task, instant)
        try:
            return self._inner.skip(task, instant, lock=lock, node=node, reason=reason, at=at)
        except HistoryError:
            self._refused("skip", task, instant, injected=False)
            raise

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
        try:
            for instant in instants[:1]:
                self._check("skip", task, instant)
        except HistoryError:
            for instant in instants[1:]:
                self._refused("skip", task, instant, injected=True)
            raise
        try:
            return self._inner.skip_many(task, instants, lock=lock, node=node, reason=reason, at=at)
        except HistoryError:
            for instant in instants:
                self._refused("skip", task, instant, injected=False)
            raise

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
        settings, descriptors = prepare_host((APP,), None, (BENCHMARKS,), None, name)
        configure_logging("WARNING", name)
        runtime = build_runtime(
            descriptors, settings, host=host, observers=(EvidenceObserver(evidence, name),)
        )
        runtime.fire_runner.get().close()  # replaced by one whose history can fail
        history = resolve_history(settings)
        flaky = None if history is None else FlakyHistory(history, control, evidence)
        runtime.fire_runner = Lazy.of(
            FireRunner(
                runtime.lock.get(),
                history=flaky,
                clock=runtime.wall_now,
                grace=settings.grace,
                clock_skew=settings.clock_skew,
                node=name,
                owns_history=True,
            )
        )
        evidence.append("boot", node=name, host=host)
        Path(os.environ["FIREFLY_CHAOS_CONTROL"]).with_suffix(".booted").write_text(
            str(os.getpid())
        )
        if host == "run":
            runtime.now = control.now
            scheduler_clock(control)
            resident = ResidentHost(descriptors, runtime, grace_period=GRACE_PERIOD, stop=stop)
            status = resident.run_until_stopped(handle_signals=False)
        else:
            ticker = TickHost(
                descriptors,
                runtime,
                clock=OffsetClock(control),
                grace_period=GRACE_PERIOD,
                stop=stop,
            )
            report = ticker.run()
            runtime.close()
            print(report.summary(), flush=True)
            status = 0
    ignore_stop_signals()
    evidence.append("exit", node=name, host=host)
    logging.shutdown()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
