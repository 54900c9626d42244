"""The node process of `benchmarks/stress.py`: the real resident host, measured.

Started as `stress.py --node CONFIG`: the host runs a `FireRunner` subclass that keeps
each fire's outcome (for the claim latency), and reports its CPU over the window and
the job runs APScheduler dropped. The task targets name the `stress` module, whose
`__getattr__` gives every `task_<anything>` the witness-writing body.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apscheduler.events import EVENT_JOB_MAX_INSTANCES

from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, FireResult
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.boot import build_runtime, validated
from firefly_scheduling.hosts.runtime.task_runtime import Lazy
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.sql_history.store import SqlRunHistory

#: The module the node processes resolve task targets in (`stress`, see its `__getattr__`).
MODULE = "stress"
TASK_PREFIX = "task_"
WITNESS_VARIABLE = "FIREFLY_STRESS_WITNESS"
READY = "ready"
#: Seconds the nodes keep running after the window, so its last fires end inside it.
DRAIN_SECONDS = 3.0


def targets(run: str, tasks: int) -> list[str]:
    return [f"{MODULE}:{TASK_PREFIX}{run}_{index:03d}" for index in range(tasks)]


# -- the node process ---------------------------------------------------------------------


class RecordingRunner(FireRunner):
    """The host's `FireRunner`, keeping every outcome for the report."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcomes: list[FireResult] = []
        self._outcomes_mutex = threading.Lock()

    def run(
        self, fire: Fire, body: Callable[[], object], *, claim: ClaimOutcome | None = None
    ) -> FireResult:
        outcome = super().run(fire, body, claim=claim)
        with self._outcomes_mutex:
            self.outcomes.append(outcome)
        return outcome


def node_main(config: dict[str, object]) -> None:
    """Run the resident host until the window has passed; report CPU and outcomes."""
    url, node = str(config["url"]), str(config["node"])
    os.environ[WITNESS_VARIABLE] = str(config["witness"])
    descriptors = validated(
        [
            ScheduledDescriptor(target=target, fixed_rate=1.0, lock_name=target, lock_ttl=30)
            for target in targets(str(config["run"]), int(config["tasks"]))  # type: ignore[call-overload]
        ]
    )
    settings = Settings(lock_provider="database", lock_urls={"database": url}, node=node)
    lock = DatabaseLeaseLock(url, table=str(config["lock_table"]))
    runtime = build_runtime(descriptors, settings, host="run", lock=lock, eager=False, node=node)
    runner = RecordingRunner(
        lock,
        history=SqlRunHistory(url, table=str(config["runs_table"])),
        clock=runtime.wall_now,
        grace=settings.grace,
        clock_skew=settings.clock_skew,
        node=node,
        owns_history=True,
    )
    runtime.fire_runner = Lazy.of(runner)
    host = ResidentHost(descriptors, runtime, max_workers=int(config["workers"]))  # type: ignore[call-overload]
    cpu: list[float] = []

    def measure_then_stop() -> None:
        start = float(sys.stdin.readline())
        end = start + float(config["seconds"])  # type: ignore[arg-type]
        time.sleep(max(0.0, start - time.time()))
        cpu.append(time.process_time())
        time.sleep(max(0.0, end - time.time()))
        cpu.append(time.process_time())
        time.sleep(DRAIN_SECONDS)
        host.request_stop()

    dropped = DroppedRuns()
    host.scheduler.add_listener(dropped, EVENT_JOB_MAX_INSTANCES)
    threading.Thread(target=measure_then_stop, daemon=True).start()
    print(READY, flush=True)  # booted; the host starts firing now
    host.run_until_stopped(handle_signals=False)
    with Path(str(config["outcomes"])).open("w") as sink:
        for outcome in runner.outcomes:
            fields = {
                "target": outcome.target,
                "instant": outcome.instant.isoformat(),
                "status": outcome.verdict.value,
                "claim": outcome.claim_seconds,
            }
            sink.write(json.dumps(fields) + "\n")
    print(json.dumps({"cpu": cpu[1] - cpu[0], "dropped": dropped.count}), flush=True)


class DroppedRuns:
    """Counts APScheduler's job runs dropped with "maximum number of running instances".

    A job whose previous run on this node has not ended (still queued for a worker
    thread, on a saturated node) is not run again: this node then never attempts that
    fire, and another node has to. Counted from the scheduler's own event, not its log
    line, which the resident host drops (`hosts.passed_over_report`).
    """

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, event: object) -> None:
        self.count += 1
