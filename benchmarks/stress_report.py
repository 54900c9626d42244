"""What a `benchmarks/stress.py` run measured, read from the witness, outcomes and history.

Duplicates and misses come from the witness file (one line per body run, written by
the body); claim attempts and latencies from the outcomes each node kept; the reasons
of the misses from the run history's skip records.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from firefly_scheduling.history.port import RunState
from firefly_scheduling_database.sql_history.store import SqlRunHistory

# -- the report ----------------------------------------------------------------------------


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


def read_report(
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


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (math.nan, math.nan, math.nan)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[98], max(values)


def _share(counts: Counter[str], total: int) -> str:
    return ", ".join(f"{status} {100 * n / total:.1f} %" for status, n in counts.most_common())


def _reasons(reasons: Counter[str]) -> str:
    return "; ".join(f"{n}: {reason}" for reason, n in reasons.most_common()) or "none"
