"""Stress: N node processes x M locked `fixed_rate='1s'` tasks on the database backend.

Every node is a separate OS process running the real resident host (`ResidentHost`
on APScheduler, `execute_fire`, `FireRunner`) with the database lock and the
database run history, both on one PostgreSQL (or any database URL). The only thing
added to the host is a `FireRunner` subclass that keeps each fire's outcome, so
the claim latency can be read from `FireResult.claim_seconds`. Each task body
appends `<task> <instant> <node> <wall time>` to a shared witness file.

Measured over a window of whole seconds, once every node is up:

* duplicates: a (task, instant) the witness shows more than once (must be 0);
* misses: a (task, instant) of the window nobody ran, with the reasons the history
  recorded for it (a skip), if any;
* CPU per fire: the node processes' CPU time (user + system) within the window,
  divided by the fires run in it; the machine's busy share beside it;
* claim latency: p50 / p99 / max of `claim_seconds` over every claim attempt;
* start lateness: body start minus the fire's instant, p50 / p99.

Connections: each node's lock pool and history pool grow to at most `--workers`
connections each (the host's thread pool size), so the server sees about
`processes x 2 x workers` of them; the default (2) keeps 16 nodes at 64. The lock
table, its fence table and the history table are created for the run and dropped
after it.

    uv run python benchmarks/stress.py [--processes 16] [--tasks 50] [--seconds 60]
        [--workers 2] [--database-url postgresql+psycopg://postgres@127.0.0.1:5432/test]

`tests-integration/test_fire_stress.py` runs a shorter version and asserts on it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any
from urllib.parse import urlsplit

from apscheduler.events import EVENT_JOB_MAX_INSTANCES

from benchmark_results import Run, Table, add_arguments, shorten
from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, FireResult
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history.port import RunState
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.boot import build_runtime, validated
from firefly_scheduling.hosts.runtime.task_runtime import Lazy
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.sql_history.store import SqlRunHistory

DEFAULT_URL = os.environ.get(
    "FIREFLY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
#: The module the node processes resolve task targets in (this file, see `__getattr__`).
MODULE = "stress"
TASK_PREFIX = "task_"
WITNESS_VARIABLE = "FIREFLY_STRESS_WITNESS"
READY = "ready"
#: Seconds the nodes keep running after the window, so its last fires end inside it.
DRAIN_SECONDS = 3.0
#: Seconds from "every node is up" to the first second of the window.
LEAD_SECONDS = 2.0


# -- the task bodies (run inside the node processes) -------------------------------------

_witness: list[int] = []
_witness_mutex = threading.Lock()


def record() -> None:
    """The body of every task: one witness line for the fire it runs in."""
    fire = current_fire()
    if fire is None:  # pragma: no cover - the host always runs it inside a fire
        raise RuntimeError("a stress task ran outside a fire")
    started = time.time()
    with _witness_mutex:
        if not _witness:
            path = os.environ[WITNESS_VARIABLE]
            _witness.append(os.open(path, os.O_WRONLY | os.O_APPEND))
    line = f"{fire.target} {fire.instant.isoformat()} {fire.node} {started:.6f}\n"
    os.write(_witness[0], line.encode())  # one small O_APPEND write: never interleaved


def __getattr__(name: str) -> Callable[[], None]:
    """`task_<anything>` is `record`: M distinct targets without M functions (PEP 562)."""
    if name.startswith(TASK_PREFIX):
        return record
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


# -- the run ------------------------------------------------------------------------------


@dataclass
class StressReport:
    processes: int
    tasks: int
    seconds: int
    workers: int
    expected: int
    fires_run: int
    duplicates: dict[tuple[str, str], int]
    misses: list[tuple[str, str]]
    miss_reasons: Counter[str]
    statuses: Counter[str]
    claim_latencies: list[float]
    lateness: list[float]
    node_cpu_seconds: float
    machine_busy: float
    exit_codes: list[int]
    dropped_job_runs: int = 0
    runs_per_node: Counter[str] = field(default_factory=Counter)
    #: Claim attempts each node made on the window's fires, won or not.
    attempts_per_node: Counter[str] = field(default_factory=Counter)

    @property
    def cpu_per_fire_ms(self) -> float:
        return 1000 * self.node_cpu_seconds / max(self.fires_run, 1)

    def table(self) -> str:
        rows = self.rows()
        width = max(len(label) for label, _ in rows)
        return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)

    def figures(self) -> dict[str, object]:
        """This run, machine-readable."""
        p50, p99, top = _percentiles(self.claim_latencies)
        late50, late99, _ = _percentiles(self.lateness)
        return {
            "processes": self.processes,
            "tasks": self.tasks,
            "seconds": self.seconds,
            "workers": self.workers,
            "expected": self.expected,
            "fires_run": self.fires_run,
            "duplicates": sum(n - 1 for n in self.duplicates.values()),
            "misses": len(self.misses),
            "miss_reasons": dict(self.miss_reasons),
            "claim_attempts": dict(self.statuses),
            "dropped_job_runs": self.dropped_job_runs,
            "claim_latency_ms": {"p50": p50, "p99": p99, "max": top},
            "start_lateness_ms": {"p50": late50, "p99": late99},
            "node_cpu_ms_per_fire_run": self.cpu_per_fire_ms,
            "node_cpu_seconds": self.node_cpu_seconds,
            "machine_busy": self.machine_busy,
            "nodes_that_ran_fires": len(self.runs_per_node),
            "nodes_that_claimed": len(self.attempts_per_node),
            "exit_codes": sorted(set(self.exit_codes)),
        }

    def rows(self) -> list[tuple[str, str]]:
        p50, p99, top = _percentiles(self.claim_latencies)
        late50, late99, _ = _percentiles(self.lateness)
        attempts = sum(self.statuses.values())
        return [
            ("nodes x tasks x seconds", f"{self.processes} x {self.tasks} x {self.seconds}"),
            ("host worker threads per node", str(self.workers)),
            ("fires expected in the window", str(self.expected)),
            ("fires run", str(self.fires_run)),
            ("duplicates", str(sum(n - 1 for n in self.duplicates.values()))),
            ("misses", f"{len(self.misses)} ({_reasons(self.miss_reasons)})"),
            ("claim attempts", f"{attempts} ({_share(self.statuses, attempts)})"),
            ("job runs a busy node dropped", str(self.dropped_job_runs)),
            ("claim latency p50 / p99 / max", f"{p50:.2f} / {p99:.2f} / {top:.2f} ms"),
            ("start lateness p50 / p99", f"{late50:.0f} / {late99:.0f} ms"),
            ("node CPU per fire run", f"{self.cpu_per_fire_ms:.2f} ms"),
            ("node CPU, all nodes", f"{self.node_cpu_seconds:.1f} s in {self.seconds} s"),
            ("machine busy (all processes)", f"{100 * self.machine_busy:.0f} %"),
            ("nodes that ran fires", f"{len(self.runs_per_node)} of {self.processes}"),
            ("nodes that claimed", f"{len(self.attempts_per_node)} of {self.processes}"),
            ("node exit codes", ", ".join(sorted(set(map(str, self.exit_codes))))),
        ]


def run_stress(
    database_url: str,
    *,
    processes: int,
    tasks: int,
    seconds: int,
    workers: int,
    workdir: Path,
) -> StressReport:
    """Start the nodes, measure the window, stop them and read what they recorded."""
    url = database_url  # the database package maps bare schemes to its drivers
    run = uuid.uuid4().hex[:8]
    lock_table, runs_table = f"ff_stress_{run}", f"ff_stress_runs_{run}"
    installer = DatabaseLeaseLock(url, table=lock_table)
    history = SqlRunHistory(url, table=runs_table)
    installer.install()
    history.install()
    witness = workdir / "witness.log"
    witness.touch()
    nodes: list[subprocess.Popen[str]] = []
    try:
        for index in range(processes):
            config = {
                "url": url,
                "node": f"node{index:02d}",
                "run": run,
                "tasks": tasks,
                "seconds": seconds,
                "workers": workers,
                "lock_table": lock_table,
                "runs_table": runs_table,
                "witness": str(witness),
                "outcomes": str(workdir / f"outcomes-{index:02d}.jsonl"),
            }
            nodes.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--node", json.dumps(config)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for node in nodes:
            assert node.stdout is not None
            if node.stdout.readline().strip() != READY:
                raise RuntimeError(f"a node did not start (exit code {node.wait()})")
        start = math.ceil(time.time() + LEAD_SECONDS)
        for node in nodes:
            assert node.stdin is not None
            node.stdin.write(f"{start}\n")
            node.stdin.flush()
        busy = _machine_busy(start, start + seconds)
        cpu, dropped = 0.0, 0
        exit_codes = []
        for node in nodes:
            out, _ = node.communicate(timeout=seconds + 120)
            summary = json.loads(out.strip().splitlines()[-1])
            cpu += summary["cpu"]
            dropped += summary["dropped"]
            exit_codes.append(node.returncode)
        report = _report(
            processes=processes,
            tasks=tasks,
            seconds=seconds,
            workers=workers,
            window=(start, start + seconds),
            all_targets=targets(run, tasks),
            witness=witness,
            outcome_files=sorted(workdir.glob("outcomes-*.jsonl")),
            history=history,
            node_cpu=cpu,
            machine_busy=busy.result(),
            exit_codes=exit_codes,
        )
        report.dropped_job_runs = dropped
        return report
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()
        for table in (history.table, *installer.tables.all):
            table.drop(history.engine, checkfirst=True)
        history.close()
        installer.close()


def _report(
    *,
    processes: int,
    tasks: int,
    seconds: int,
    workers: int,
    window: tuple[int, int],
    all_targets: list[str],
    witness: Path,
    outcome_files: list[Path],
    history: SqlRunHistory,
    node_cpu: float,
    machine_busy: float,
    exit_codes: list[int],
) -> StressReport:
    instants = [datetime.fromtimestamp(s, UTC).isoformat() for s in range(*window)]
    expected = {(target, instant) for target in all_targets for instant in instants}
    runs: Counter[tuple[str, str]] = Counter()
    lateness = []
    runs_per_node: Counter[str] = Counter()
    for line in witness.read_text().splitlines():
        target, instant, node, started = line.split()
        runs[(target, instant)] += 1
        if (target, instant) in expected:
            lateness.append(1000 * (float(started) - datetime.fromisoformat(instant).timestamp()))
            runs_per_node[node] += 1
    statuses: Counter[str] = Counter()
    attempts_per_node: Counter[str] = Counter()
    latencies = []
    for path in outcome_files:
        node = f"node{path.stem.removeprefix('outcomes-')}"
        for line in path.read_text().splitlines():
            outcome = json.loads(line)
            if (outcome["target"], outcome["instant"]) not in expected:
                continue
            statuses[outcome["status"]] += 1
            attempts_per_node[node] += 1
            if outcome["claim"] is not None:
                latencies.append(1000 * outcome["claim"])
    misses = sorted(expected - set(runs))
    reasons: Counter[str] = Counter()
    missed = set(misses)
    for target in {target for target, _ in misses}:
        for record in history.runs(target, limit=10 * len(instants)):
            if (target, record.instant.isoformat()) in missed and record.state is RunState.SKIPPED:
                # Grouped by kind: a reason names its task's lock, which varies.
                reasons[(record.error or "skipped").split(" (lock ")[0]] += 1
    recorded = sum(reasons.values())
    if recorded < len(misses):
        reasons["no record: no node attempted it in time"] = len(misses) - recorded
    return StressReport(
        processes=processes,
        tasks=tasks,
        seconds=seconds,
        workers=workers,
        expected=len(expected),
        fires_run=sum(n for key, n in runs.items() if key in expected),
        duplicates={key: n for key, n in runs.items() if n > 1},
        misses=misses,
        miss_reasons=reasons,
        statuses=statuses,
        claim_latencies=latencies,
        lateness=lateness,
        node_cpu_seconds=node_cpu,
        machine_busy=machine_busy,
        exit_codes=exit_codes,
        runs_per_node=runs_per_node,
        attempts_per_node=attempts_per_node,
    )


class _Sampled:
    """A value a background thread computes; `result()` waits for it."""

    def __init__(self, compute: Callable[[], float]) -> None:
        self._value: list[float] = []
        self._thread = threading.Thread(target=lambda: self._value.append(compute()), daemon=True)
        self._thread.start()

    def result(self) -> float:
        self._thread.join()
        return self._value[0] if self._value else math.nan


def _machine_busy(start: float, end: float) -> _Sampled:
    """The share of all CPUs busy between `start` and `end` (Unix times), from /proc/stat."""

    def ticks() -> tuple[int, int]:
        fields = [int(value) for value in Path("/proc/stat").read_text().split()[1:9]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields) - idle, sum(fields)

    def compute() -> float:
        time.sleep(max(0.0, start - time.time()))
        busy0, total0 = ticks()
        time.sleep(max(0.0, end - time.time()))
        busy1, total1 = ticks()
        return (busy1 - busy0) / max(total1 - total0, 1)

    if not Path("/proc/stat").exists():
        return _Sampled(lambda: math.nan)
    return _Sampled(compute)


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (math.nan, math.nan, math.nan)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[98], max(values)


def _share(counts: Counter[str], total: int) -> str:
    return ", ".join(f"{status} {100 * n / total:.1f} %" for status, n in counts.most_common())


def _reasons(reasons: Counter[str]) -> str:
    return "; ".join(f"{n}: {reason}" for reason, n in reasons.most_common()) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--node", help=argparse.SUPPRESS)
    add_arguments(parser)
    arguments = parser.parse_args()
    if arguments.node:
        node_main(json.loads(arguments.node))
        return
    shorten(arguments, parser, processes=2, tasks=5, seconds=5, runs=1)
    run = Run("stress", arguments, parser, servers=_servers(arguments.database_url))
    reports: list[StressReport] = []
    for _ in range(arguments.runs):
        with TemporaryDirectory(prefix="firefly-stress-") as workdir:
            report = run_stress(
                arguments.database_url,
                processes=arguments.processes,
                tasks=arguments.tasks,
                seconds=arguments.seconds,
                workers=arguments.workers,
                workdir=Path(workdir),
            )
        reports.append(report)
        print(report.table())
        for (target, instant), n in sorted(report.duplicates.items())[:10]:
            print(f"duplicate: {target} @ {instant} ran {n} times")
    columns = ["figure", *(f"run {index + 1}" for index in range(len(reports)))]
    table = Table(
        f"{arguments.processes} nodes x {arguments.tasks} tasks, database backend", columns
    )
    every = [report.rows() for report in reports]
    table.rows = [
        [label, *(rows[index][1] for rows in every)] for index, (label, _) in enumerate(every[0])
    ]
    run.write(
        "Under load: many nodes on the database backend",
        [table],
        [report.figures() for report in reports],
        notes=[
            f"{arguments.processes} processes, each the resident host with {arguments.tasks} "
            f"locked one-second tasks, the database lock and run history on "
            f"{_redacted(arguments.database_url)}; {arguments.seconds} s windows once every "
            f"node is up; {arguments.workers} worker threads per node.",
            "Every node attempts every fire: one claim wins, the others find it claimed.",
        ],
    )


def _servers(url: str) -> tuple[str, ...]:
    scheme = urlsplit(url).scheme
    if scheme.startswith("postgres"):
        return ("postgres",)
    if scheme.startswith(("mysql", "mariadb")):
        return ("mysql",)
    return ()


def _redacted(url: str) -> str:
    """The URL's scheme and database alone: a benchmark's page names no credential."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0]
    if scheme == "sqlite":
        return "a SQLite file"
    return f"{scheme} (database {parts.path.lstrip('/') or 'by default'})"


if __name__ == "__main__":
    main()
