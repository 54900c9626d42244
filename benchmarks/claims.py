"""Fire claims per second at saturation, fleet-wide: each adapter, and its raw driver.

A locked fixed_rate or cron fire starts with a fire claim on every node that sees it
(`FireRunner._claim`: `claiming_lock(lock).try_claim(claim_name(...), seconds)`), so
the claims a backend can take per second bound the fires a fleet can attempt. This
script measures that bound the way a fleet loads the server:

* P processes (default 4, the "fleet"), each with T threads (default 8) sharing ONE
  lock instance, as the threads of one node share the node's lock;
* every claim is on a fresh fire name (its own target, a new instant each time), so
  every claim wins and nothing contends: the figure is the server's and the
  client's throughput, not a measure of lost races;
* beside each adapter, its raw driver sends the SAME claim statement or command
  (taken from the adapter's module, on purpose: the bytes on the wire are equal)
  from the same P x T threads, each thread on its own connection: the ceiling, and
  the ratio adapter / raw says how much of it the adapter reaches. Both build the
  claim name with `claim_name`, so the ratio is the lock layer's cost alone.

Reported per backend, over `--runs` runs (adapter and raw alternate within a run,
the first of the two swapping every run): claims/s fleet-wide (median and range),
process CPU per claim (user + system over the window, all threads, summed over the
processes, divided by the claims), and the most TCP connections one process held to
the server (sampled through the window). Rows are printed as markdown, and written
to `docs/results/claims.md` and `claims.json` (see `benchmark_results`). The claimers
are in `claim_drivers`, the fleet of processes in `claims_fleet`.

    uv run python benchmarks/claims.py [--backends redis postgres] [--seconds 5]
        [--runs 3] [--processes 4] [--threads 8]

Backends: postgres, mysql, redis, memcached, etcd, database-sqlite,
database-postgres, database-mariadb; URLs from the `FIREFLY_TEST_*_URL` variables
(the local servers by default), as in `benchmarks/locks.py`. Claims written here
expire after `--claim-seconds` (default 10) and are swept like any other.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import uuid
from datetime import UTC, datetime
from typing import Any

from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary
from claims_fleet import FleetResult, Job, prepare, run_fleet

BACKENDS = (
    "postgres",
    "mysql",
    "redis",
    "memcached",
    "etcd",
    "database-sqlite",
    "database-postgres",
    "database-mariadb",
)


COLUMNS = [
    "backend",
    "adapter claims/s",
    "raw driver claims/s",
    "adapter / raw",
    "CPU ms per claim (adapter / raw)",
    "connections per process (adapter / raw)",
    "claims not won (adapter / raw)",
]


def measure_backend(args: argparse.Namespace, backend: str, sqlite_path: str) -> dict[str, Any]:
    """`--runs` runs of the adapter and the raw driver, alternating; machine-readable."""
    prepare(backend, sqlite_path)
    measured: dict[str, list[FleetResult]] = {"adapter": [], "raw": []}
    ratios: list[float] = []
    for run in range(args.runs):
        order = ("adapter", "raw") if run % 2 == 0 else ("raw", "adapter")
        for flavour in order:
            job = Job(
                backend=backend,
                flavour=flavour,
                seconds=args.seconds,
                threads=args.threads,
                claim_seconds=args.claim_seconds,
                sqlite_path=sqlite_path,
                prefix=f"bench.claims.{uuid.uuid4().hex[:12]}",
            )
            measured[flavour].append(run_fleet(job, args.processes))
        ratios.append(
            measured["adapter"][-1].claims_per_second / measured["raw"][-1].claims_per_second
        )
    adapter, raw = measured["adapter"], measured["raw"]
    return {
        "backend": backend,
        "adapter_claims_per_second": summary([r.claims_per_second for r in adapter]),
        "raw_claims_per_second": summary([r.claims_per_second for r in raw]),
        "adapter_over_raw": summary(ratios),
        "cpu_ms_per_claim": {
            "adapter": statistics.median(r.cpu_ms_per_claim for r in adapter),
            "raw": statistics.median(r.cpu_ms_per_claim for r in raw),
        },
        "connections_per_process": {
            "adapter": max(r.connections for r in adapter),
            "raw": max(r.connections for r in raw),
        },
        "claims_not_won": {
            "adapter": sum(r.errors for r in adapter),
            "raw": sum(r.errors for r in raw),
        },
    }


def row(figure: dict[str, Any]) -> list[str]:
    def values(key: str) -> list[float]:
        cell = figure[key]
        return [cell["min"], cell["median"], cell["max"]] if cell["runs"] > 1 else [cell["median"]]

    cpu, connections = figure["cpu_ms_per_claim"], figure["connections_per_process"]
    errors = figure["claims_not_won"]
    return [
        figure["backend"],
        spread(values("adapter_claims_per_second"), 0, thousands=True),
        spread(values("raw_claims_per_second"), 0, thousands=True),
        spread(values("adapter_over_raw"), 2),
        f"{cpu['adapter']:.2f} / {cpu['raw']:.2f}",
        f"{connections['adapter']} / {connections['raw']}",
        f"{errors['adapter']} / {errors['raw']}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--seconds", type=float, default=5.0, help="timed window per fleet run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8, help="threads per process")
    parser.add_argument("--claim-seconds", type=float, default=10.0)
    add_arguments(parser)
    args = parser.parse_args()
    shorten(args, parser, seconds=1.0, runs=1, processes=2, threads=2)
    run = Run("claims", args, parser, servers=servers_of(args.backends))

    load = os.getloadavg()
    print(
        f"# fire claims at saturation, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{os.cpu_count()} CPUs, load average {load[0]:.0f} / {load[1]:.0f} / {load[2]:.0f}; "
        f"{args.processes} processes x {args.threads} threads, {args.runs} runs of "
        f"{args.seconds:g} s each"
    )
    print()
    table = Table("Fire claims per second at saturation, fleet-wide", COLUMNS, align="lrrrrrr")
    print("| " + " | ".join(COLUMNS) + " |")
    every: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        sqlite_path = os.path.join(scratch, "claims.sqlite3")
        for backend in args.backends:
            every.append(measure_backend(args, backend, sqlite_path))
            table.rows.append(row(every[-1]))
            print("| " + " | ".join(table.rows[-1]) + " |", flush=True)
    run.write(
        "Fire claims per second at saturation",
        [table],
        every,
        notes=[
            f"{args.processes} processes, each with {args.threads} threads sharing one lock, "
            f"claim fresh fire names for {args.seconds:g} s; {args.runs} run(s), adapter and "
            "raw driver alternating. Every claim must win: a claim not won is an error of "
            "the backend (a SQLite busy timeout), counted in the last column.",
            "raw driver: the adapter's own claim statement or command, each thread on its "
            "own connection; adapter / raw is how much of that ceiling the adapter reaches.",
        ],
    )


if __name__ == "__main__":
    main()
