"""A fleet run's figures, counted from the bodies' witness lines and the nodes' fire logs.

Duplicates and misses come from the witness lines (one per body run, written by the
body itself); the verdicts the nodes logged explain the misses.
"""

import json
import math
import os
import statistics
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

GOAL_P99_MS = 250.0


@dataclass
class Result:
    backend: str
    tasks: int
    nodes: int
    seconds: int
    expected: int
    ran: int
    duplicates: int
    missed: int
    miss_reasons: dict[str, int]
    lateness_ms: tuple[float, float, float]
    cpu_ms_per_attempt: float
    cpu_ms_per_run: float
    attempts: int
    connections: int

    @property
    def meets_goal(self) -> bool:
        return self.missed == 0 and self.duplicates == 0 and self.lateness_ms[1] < GOAL_P99_MS

    def figures(self) -> dict[str, object]:
        """This run, machine-readable."""
        p50, p99, worst = self.lateness_ms
        return {
            "tasks": self.tasks,
            "expected": self.expected,
            "ran": self.ran,
            "duplicates": self.duplicates,
            "missed": self.missed,
            "miss_reasons": self.miss_reasons,
            "lateness_p50_ms": p50,
            "lateness_p99_ms": p99,
            "lateness_max_ms": worst,
            "cpu_ms_per_attempt": self.cpu_ms_per_attempt,
            "cpu_ms_per_run": self.cpu_ms_per_run,
            "attempts": self.attempts,
            "connections": self.connections,
            "meets_goal": self.meets_goal,
        }

    def row(self) -> str:
        p50, p99, worst = self.lateness_ms
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.miss_reasons.items())) or "-"
        return (
            f"| {self.backend} | {self.tasks} x {self.nodes} | {self.expected:,} | {self.ran:,} "
            f"| {self.duplicates} | {self.missed} ({reasons}) "
            f"| {p50:.0f} / {p99:.0f} / {worst:.0f} "
            f"| {self.cpu_ms_per_attempt:.2f} / {self.cpu_ms_per_run:.2f} | {self.connections} "
            f"| {'yes' if self.meets_goal else 'no'} |"
        )


HEADER = (
    "| backend | tasks x nodes | expected | ran | duplicates | missed (reasons) "
    "| lateness p50 / p99 / max ms | CPU ms per attempt / per run | connections per node "
    "| goal |\n|---|---|---:|---:|---:|---|---|---|---:|---|"
)


def analyse(
    backend: str,
    tasks: int,
    nodes: int,
    seconds: int,
    start: int,
    scratch: Path,
    witness: Path,
    cpu: float,
    connections: int,
) -> Result:
    window = range(start, start + seconds)
    runs: Counter[tuple[int, int]] = Counter()
    lateness: list[float] = []
    for line in witness.read_text().splitlines():
        task, instant, wall, _ = line.split()
        second = round(float(instant))
        if second in window:
            runs[(int(task), second)] += 1
            lateness.append((float(wall) - float(instant)) * 1000)
    verdicts: dict[tuple[int, int], list[str]] = {}
    attempts = 0
    for n in range(nodes):
        for line in (scratch / f"node{n}.jsonl").read_text().splitlines():
            record = json.loads(line)
            second = round(datetime.fromisoformat(record["instant"]).timestamp())
            if second in window:
                attempts += 1
                index = int(record["target"].rpartition("_")[2])
                verdicts.setdefault((index, second), []).append(record["status"])
    expected = {(t, s) for t in range(tasks) for s in window}
    missed = expected - set(runs)
    if missed and os.environ.get("FLEET_DEBUG"):
        print("# missed seconds:", sorted(Counter(s for _, s in missed).items()), "window", start)
    reasons: Counter[str] = Counter()
    for fire in missed:
        seen = [v for v in verdicts.get(fire, []) if v != "claimed_elsewhere"]
        reasons[seen[0] if seen else "no node handled it"] += 1
    lateness.sort()
    ran = sum(runs.values())
    return Result(
        backend=backend,
        tasks=tasks,
        nodes=nodes,
        seconds=seconds,
        expected=len(expected),
        ran=ran,
        duplicates=sum(count - 1 for count in runs.values() if count > 1),
        missed=len(missed),
        miss_reasons=dict(reasons),
        lateness_ms=(
            statistics.median(lateness) if lateness else math.nan,
            lateness[min(len(lateness) - 1, int(len(lateness) * 0.99))] if lateness else math.nan,
            lateness[-1] if lateness else math.nan,
        ),
        cpu_ms_per_attempt=cpu * 1000 / max(attempts, 1),
        cpu_ms_per_run=cpu * 1000 / max(ran, 1),
        attempts=attempts,
        connections=connections,
    )
