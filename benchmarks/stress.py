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

`tests-integration/test_fire_stress.py` runs a shorter version and asserts on it. Each
node is a `stress_node` process; `stress_report` reads what they recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory
from urllib.parse import urlsplit

from benchmark_results import Run, Table, add_arguments, shorten
from firefly_scheduling import current_fire
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from stress_node import READY, TASK_PREFIX, WITNESS_VARIABLE, node_main, targets
from stress_report import StressReport, read_report

DEFAULT_URL = os.environ.get(
    "FIREFLY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
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


# -- the run ------------------------------------------------------------------------------


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
        report = read_report(
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
