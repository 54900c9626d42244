"""One cron fleet of `benchmarks/fleet.py --jitter`: T tasks on `* * * * *` x N nodes.

The same real nodes, no-op bodies and witness lines as the one-second fleet
(`fleet_nodes`), on a generated module whose T tasks are
`@scheduled(cron="* * * * *", lock=True)`, with `jitter=` or without. The window is
M whole minutes (M fires of every task), from the first minute that starts once every
node is up; it ends when every fire of the window was handled by every node (or the
grace after the last one ran out). Measured in it:

* fires: expected (T x M), run, duplicates and missed, from the witness lines;
* the nodes' claims (client side): how long each fire waited for its claim, from the
  nodes' fire logs (`claim_seconds`);
* the server's claims (`fleet_server_claims`): how long the server took to serve each
  claim request, and the most fire claims it served in one second;
* the bodies' start after their instant (how far the jitter spread them).

The task module's name is unique to the fleet (`fleet_cron_<T>_<pid>_<n>`), so the
server-side probes pick this fleet's claims out of a shared server's, and no fleet
finds a run history or claims of another.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from fleet_backends import backend_env, migrate
from fleet_nodes import TASK_MODULE, fleet_env, nodes_running
from fleet_server_claims import ServerClaim, claim_probe

CRON_TASK = """
@scheduled(cron="* * * * *", lock=True{jitter})
def task_{index}():
    _witness({index})
"""
#: Seconds between every node being up and the first minute of the window, at least.
LEAD = 3
_fleets = itertools.count()


@dataclass
class CronResult:
    backend: str
    jitter: int | None
    tasks: int
    nodes: int
    minutes: int
    expected: int
    ran: int
    duplicates: int
    missed: int
    miss_reasons: dict[str, int]
    #: The nodes' wait for a claim, ms: p50, p99, max, and how many claims.
    client_claim_ms: tuple[float, float, float]
    client_claims: int
    #: The server's time per claim request, ms: p50, p99, max (None: no probe).
    server_claim_ms: tuple[float, float, float] | None
    server_requests: int
    server_claims: int
    #: The most fire claims the server served in one wall-clock second.
    peak_claims_per_second: int | None
    #: Body start minus the fire's instant, s: p50, p99, max.
    start_after_instant_s: tuple[float, float, float]
    #: False when the server's log dropped entries of the window (a full slow log).
    server_log_complete: bool = True
    #: The machine's 1-minute load average when the window began.
    load: float = math.nan

    @property
    def variant(self) -> str:
        return f'jitter="{self.jitter}s"' if self.jitter else "no jitter"

    def figures(self) -> dict[str, object]:
        """This run, machine-readable."""
        return {
            "jitter_seconds": self.jitter,
            "tasks": self.tasks,
            "nodes": self.nodes,
            "minutes": self.minutes,
            "expected": self.expected,
            "ran": self.ran,
            "duplicates": self.duplicates,
            "missed": self.missed,
            "miss_reasons": self.miss_reasons,
            "client_claim_ms_p50_p99_max": self.client_claim_ms,
            "client_claims": self.client_claims,
            "server_claim_ms_p50_p99_max": self.server_claim_ms,
            "server_requests": self.server_requests,
            "server_claims": self.server_claims,
            "peak_claims_per_second": self.peak_claims_per_second,
            "start_after_instant_s_p50_p99_max": self.start_after_instant_s,
            "server_log_complete": self.server_log_complete,
            "load_average": self.load,
        }

    def row(self) -> str:
        server = (
            "-"
            if self.server_claim_ms is None
            else "{:.3f} / {:.3f} / {:.3f}".format(*self.server_claim_ms)
        )
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.miss_reasons.items())) or "-"
        return (
            f"| {self.backend} | {self.variant} | {self.ran:,} of {self.expected:,} "
            f"| {self.duplicates} | {self.missed} ({reasons}) "
            f"| {server} ({self.server_requests:,} requests, {self.server_claims:,} claims) "
            f"| {'{:.1f} / {:.1f} / {:.1f}'.format(*self.client_claim_ms)} "
            f"| {self.peak_claims_per_second if self.peak_claims_per_second is not None else '-'} "
            f"| {'{:.1f} / {:.1f} / {:.1f}'.format(*self.start_after_instant_s)} "
            f"| {self.load:.1f} |"
        )


HEADER = (
    "| backend | variant | ran | duplicates | missed (reasons) "
    "| server claim ms p50 / p99 / max | client claim ms p50 / p99 / max "
    "| peak claims/s | body start after instant s p50 / p99 / max | load |\n"
    "|---|---|---:|---:|---|---|---|---:|---|---:|"
)


def run_cron_fleet(
    backend: str,
    tasks: int,
    nodes: int,
    minutes: int,
    jitter: int | None,
    *,
    grace: float,
    postgres_log: Path | None = None,
) -> CronResult:
    module_name = f"fleet_cron_{tasks}_{os.getpid()}_{next(_fleets)}"
    with tempfile.TemporaryDirectory(prefix="firefly-fleet-") as raw:
        scratch = Path(raw)
        spread = f', jitter="{jitter}s"' if jitter else ""
        (scratch / f"{module_name}.py").write_text(
            f'"""Generated by benchmarks/fleet.py --jitter: {tasks} locked cron tasks."""\n'
            + TASK_MODULE.format(tasks=tasks).split("\n", 1)[1]  # its witness, not its docstring
            + "".join(CRON_TASK.format(index=i, jitter=spread) for i in range(tasks))
        )
        witness = scratch / "witness.log"
        provider_env, _ = backend_env(backend, scratch)
        if backend.startswith("database"):
            migrate(provider_env)
        probe = claim_probe(backend, provider_env, module_name, postgres_log)
        server: list[ServerClaim] | None = None
        complete = True
        try:
            if probe is not None:
                probe.prepare()
            env = fleet_env(provider_env, witness, scratch)
            with nodes_running(scratch, module_name, env, nodes, log_level="INFO") as processes:
                wait_until_started(scratch, processes)
                first = (math.floor(time.time() + LEAD) // 60 + 1) * 60
                time.sleep(max(first - 1 - time.time(), 0))
                if probe is not None:
                    probe.begin()
                load = os.getloadavg()[0]
                last = first + 60 * (minutes - 1)
                wait_until_handled(scratch, witness, tasks, nodes, first, last, jitter, grace)
                if probe is not None:
                    server, complete = probe.end()
        finally:
            if probe is not None:
                probe.close()
        window = range(first, last + 1, 60)
        result = analyse_cron(backend, jitter, tasks, nodes, window, scratch, witness, server)
        result.server_log_complete = complete
        result.load = load
        return result


def wait_until_started(scratch: Path, processes: Sequence[object]) -> None:
    """Until every node logged that its resident host started (no cron fire comes sooner)."""
    deadline = time.monotonic() + 180
    errs = [scratch / f"node{n}.err" for n in range(len(processes))]
    while time.monotonic() < deadline:
        if all(err.exists() and "resident host started" in err.read_text() for err in errs):
            return
        if any(process.poll() is not None for process in processes):  # type: ignore[attr-defined]
            break
        time.sleep(0.2)
    raise RuntimeError(f"the nodes did not start: {errs[0].read_text()[-2000:]}")


def wait_until_handled(
    scratch: Path,
    witness: Path,
    tasks: int,
    nodes: int,
    first: int,
    last: int,
    jitter: int | None,
    grace: float,
) -> None:
    """Until every node logged every fire of the window, and each ran once (or the
    grace after the last fire's latest start ran out: the misses are counted then)."""
    deadline = last + (jitter or 0) + grace + 5
    wanted = tasks * ((last - first) // 60 + 1)
    while time.time() < deadline:
        time.sleep(1.0)
        if time.time() < last + (jitter or 0):
            continue
        logged = [_in_window(scratch / f"node{n}.jsonl", first, last) for n in range(nodes)]
        if min(logged) >= wanted and _witnessed(witness, first, last) >= wanted:
            return


def _in_window(log: Path, first: int, last: int) -> int:
    if not log.exists():
        return 0
    return sum(
        first <= _second(json.loads(line)["instant"]) <= last
        for line in log.read_text().splitlines()
    )


def _witnessed(witness: Path, first: int, last: int) -> int:
    if not witness.exists():
        return 0
    return sum(
        first <= round(float(line.split()[1])) <= last for line in witness.read_text().splitlines()
    )


def _second(instant: str) -> int:
    return round(datetime.fromisoformat(instant).timestamp())


def analyse_cron(
    backend: str,
    jitter: int | None,
    tasks: int,
    nodes: int,
    window: range,
    scratch: Path,
    witness: Path,
    server: list[ServerClaim] | None,
) -> CronResult:
    runs: Counter[tuple[int, int]] = Counter()
    starts: list[float] = []
    for line in witness.read_text().splitlines() if witness.exists() else []:
        task, instant, wall, _ = line.split()
        second = round(float(instant))
        if second in window:
            runs[(int(task), second)] += 1
            starts.append(float(wall) - float(instant))
    verdicts: dict[tuple[int, int], list[str]] = {}
    waits: list[float] = []
    for n in range(nodes):
        for line in (scratch / f"node{n}.jsonl").read_text().splitlines():
            record = json.loads(line)
            second = _second(record["instant"])
            if second in window:
                index = int(record["target"].rpartition("_")[2])
                verdicts.setdefault((index, second), []).append(record["status"])
                if record.get("claim_seconds") is not None:
                    waits.append(record["claim_seconds"] * 1000)
    expected = {(t, s) for t in range(tasks) for s in window}
    missed = expected - set(runs)
    reasons: Counter[str] = Counter()
    for fire in missed:
        seen = [v for v in verdicts.get(fire, []) if v != "claimed_elsewhere"]
        reasons[seen[0] if seen else "no node handled it"] += 1
    per_second: Counter[int] = Counter()
    for claim in server or []:
        per_second[math.floor(claim.at)] += claim.claims
    return CronResult(
        backend=backend,
        jitter=jitter,
        tasks=tasks,
        nodes=nodes,
        minutes=len(window),
        expected=len(expected),
        ran=sum(runs.values()),
        duplicates=sum(count - 1 for count in runs.values() if count > 1),
        missed=len(missed),
        miss_reasons=dict(reasons),
        client_claim_ms=percentiles(waits),
        client_claims=len(waits),
        server_claim_ms=None if server is None else percentiles([c.ms for c in server]),
        server_requests=len(server or []),
        server_claims=sum(c.claims for c in server or []),
        peak_claims_per_second=None if server is None else max(per_second.values(), default=0),
        start_after_instant_s=percentiles(starts),
    )


def percentiles(values: list[float]) -> tuple[float, float, float]:
    """p50, p99 (nearest rank) and max; NaN for none."""
    if not values:
        return (math.nan, math.nan, math.nan)
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, math.ceil(len(ordered) * 0.99) - 1)]
    return (statistics.median(ordered), p99, ordered[-1])
