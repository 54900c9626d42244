"""Fleet: T locked one-second tasks x N resident nodes for S seconds, on one backend.

Every node is a real `firefly-scheduling run` process (the resident host, the
configured provider, its default run history), started on a generated task module
whose T tasks are `@scheduled(fixed_rate="1s", lock=True)` no-op bodies. Each body
appends `<task> <instant> <wall time> <pid>` to a witness file with one `O_APPEND`
write: the evidence comes from the bodies, not from the host's own bookkeeping.
Each node also writes its `--fire-log` (one JSON line per fire it handled, whatever
the verdict), which gives the fire attempts and the reasons of the fires not run.

Over a window of whole seconds, once every node is up:

* fires: expected (T x S), run, **duplicates** (an instant of a task run twice)
  and **missed** (not run by any node), with the verdicts the nodes logged for them;
* lateness p50 / p99 / max: body start minus the fire's instant;
* CPU per fire attempt: the nodes' CPU time (user + system) in the window divided
  by the fires they handled (every node handles every fire: one runs it, the
  others lose the claim), and per fire run;
* connections: the most TCP connections any node held to the backend's ports
  (sampled through the window).

    uv run python benchmarks/fleet.py [--backends redis postgres] [--tasks 200]
        [--nodes 2] [--seconds 30] [--warmup 5] [--runs 3]
    uv run python benchmarks/fleet.py --find-max [--backends postgres]   # largest T
    uv run python benchmarks/fleet.py --backends postgres --outage 300   # boot catch-up
    uv run python benchmarks/fleet.py --jitter [--backends redis postgres] [--tasks 2000]
        [--runs 3] [--minutes 1] [--jitter-seconds 30]   # cron minute, with/without jitter=

Backends: postgres, mysql, redis, redis-cluster, memcached, etcd, database-sqlite,
database-postgres, database-mysql; URLs from the `FIREFLY_TEST_*_URL` variables
(the local servers by default). `--find-max` doubles T from `--tasks` until the goal
(0 missed, 0 duplicates, lateness p99 < 250 ms) fails, then bisects. The figures go
to `docs/results/fleet.md` (`fleet-largest-t.md` with `--find-max`) and their JSON
twins (see `benchmark_results`). A fleet's nodes run in `fleet_nodes`, on the
environments of `fleet_backends`; `fleet_evidence` counts its figures. `--jitter`
(`fleet_jitter`, `fleet_cron`, `fleet_server_claims`) runs cron-minute fleets instead,
with and without `jitter=`, and writes `docs/results/fleet_jitter.md`: its defaults are
its own (2,000 tasks, Redis and PostgreSQL).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections import Counter
from datetime import UTC, datetime

from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary
from fleet_evidence import HEADER, Result
from fleet_jitter import JITTER_BACKENDS, JITTER_TASKS, add_jitter_arguments, run_jitter
from fleet_nodes import run_fleet

#: Backends whose run history is SQL by default (the lock's own database): the ones a
#: fleet start pays a boot catch-up on, unless each task's newest record is recent.
SQL_HISTORY = ("postgres", "mysql", "database-sqlite", "database-postgres", "database-mysql")
BACKENDS = (
    *("redis", "redis-cluster", "memcached", "etcd", "postgres", "mysql"),
    *("database-postgres", "database-mysql", "database-sqlite"),
)


def outage_of(backend: str, outage: int | None) -> int | None:
    """The outage a backend's fleet starts from: `--outage` (1 s by default) on the SQL
    history backends, so that no run pays a catch-up of the fires since an earlier run
    on the same task names; none elsewhere (no history to start from)."""
    if backend not in SQL_HISTORY:
        return None
    return 1 if outage is None else outage


def find_max(
    backend: str, start: int, nodes: int, seconds: int, warmup: int, limit: int
) -> dict[str, object]:
    """Double T until the goal fails (or T passes `limit`), then bisect between the last
    pass and the fail. Returns every size tried and the largest that met the goal."""
    tried: list[Result] = []

    def attempt(tasks: int) -> bool:
        result = run_fleet(backend, tasks, nodes, seconds, warmup, outage=outage_of(backend, None))
        tried.append(result)
        print(result.row(), flush=True)
        return result.meets_goal

    good, bad, tasks = 0, 0, start
    while tasks <= limit:
        if attempt(tasks):
            good = tasks
            tasks *= 2
        else:
            bad = tasks
            break
    while bad and bad - good > max(good // 8, 25):
        tasks = (good + bad) // 2
        if attempt(tasks):
            good = tasks
        else:
            bad = tasks
    print(f"\nlargest T meeting the goal on {backend} with {nodes} nodes: {good}")
    return {
        "backend": backend,
        "nodes": nodes,
        "largest_tasks_meeting_the_goal": good,
        "first_size_missing_it": bad or None,
        "limit_reached": not bad,
        "sizes": [result.figures() for result in sorted(tried, key=lambda r: r.tasks)],
    }


RUN_COLUMNS = [
    "backend",
    "tasks x nodes",
    "ran (of expected), per run",
    "duplicates",
    "missed (reasons)",
    "lateness p50 / p99 / max, ms (p99: median and range over runs)",
    "CPU ms per attempt / per run",
    "connections per node",
    "goal (p99 < 250 ms, none missed)",
]


def summarise(results: list[Result]) -> dict[str, object]:
    """Every run of one backend: the figures of each, and median and range over them."""
    first = results[0]
    return {
        "backend": first.backend,
        "tasks": first.tasks,
        "nodes": first.nodes,
        "seconds": first.seconds,
        "runs": [result.figures() for result in results],
        "lateness_p50_ms": summary([r.lateness_ms[0] for r in results]),
        "lateness_p99_ms": summary([r.lateness_ms[1] for r in results]),
        "lateness_max_ms": summary([r.lateness_ms[2] for r in results]),
        "cpu_ms_per_attempt": summary([r.cpu_ms_per_attempt for r in results]),
        "cpu_ms_per_run": summary([r.cpu_ms_per_run for r in results]),
        "goal_met": sum(r.meets_goal for r in results),
    }


def run_row(results: list[Result]) -> list[str]:
    first = results[0]
    reasons: Counter[str] = Counter()
    for result in results:
        reasons.update(result.miss_reasons)
    missed = "/".join(str(r.missed) for r in results)
    why = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
    p50 = statistics.median(r.lateness_ms[0] for r in results)
    worst = max(r.lateness_ms[2] for r in results)
    p99 = spread([r.lateness_ms[1] for r in results], 0)
    met = sum(r.meets_goal for r in results)
    return [
        first.backend,
        f"{first.tasks} x {first.nodes}",
        ", ".join(f"{r.ran:,}" for r in results) + f" (of {first.expected:,})",
        "/".join(str(r.duplicates) for r in results),
        missed + (f" ({why})" if why else ""),
        f"{p50:.0f} / **{p99}** / {worst:.0f}",
        f"{spread([r.cpu_ms_per_attempt for r in results], 2)} / "
        f"{spread([r.cpu_ms_per_run for r in results], 2)}",
        str(max(r.connections for r in results)),
        f"{'met' if met == len(results) else '**not met**'}, {met} of {len(results)}",
    ]


SIZE_COLUMNS = ["backend", "largest T meeting the goal", "sizes tried: T (p99 ms, met)"]


def size_row(found: dict[str, object]) -> list[str]:
    sizes = found["sizes"]
    assert isinstance(sizes, list)
    tried = ", ".join(
        f"{size['tasks']} ({size['lateness_p99_ms']:.0f}, {'yes' if size['meets_goal'] else 'no'})"
        for size in sizes
    )
    largest = str(found["largest_tasks_meeting_the_goal"])
    if found["limit_reached"]:
        largest = f"at least {largest} (the size limit)"
    return [str(found["backend"]), largest, tried]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    jitter = "--jitter" in sys.argv[1:]  # its own defaults: see fleet_jitter
    parser.add_argument(
        "--backends",
        "--backend",
        nargs="+",
        choices=BACKENDS,
        default=list(JITTER_BACKENDS if jitter else BACKENDS),
    )
    parser.add_argument("--tasks", type=int, default=JITTER_TASKS if jitter else 200)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5, help="seconds after every node fired")
    parser.add_argument("--runs", type=int, default=3, help="rounds over the backends")
    parser.add_argument("--find-max", action="store_true", help="the largest T meeting the goal")
    parser.add_argument(
        "--max-tasks", type=int, default=3200, help="--find-max doubles T up to this at most"
    )
    parser.add_argument(
        "--outage",
        type=int,
        metavar="SECONDS",
        help="start as a fleet back from an outage this long (the SQL history backends; "
        "default 1 s there, see outage_of and end_outage)",
    )
    parser.add_argument(
        "--max-workers",
        type=int,
        metavar="N",
        help="each node's `run --max-workers` (default: the host's, one thread per task up to 64)",
    )
    add_jitter_arguments(parser)
    add_arguments(parser)
    args = parser.parse_args()
    if args.jitter:
        if args.find_max:
            parser.error("--jitter and --find-max measure different fleets: give one")
        shorten(args, parser, tasks=20, runs=1)
        run_jitter(args, parser)
        return
    shorten(args, parser, seconds=5, warmup=1, runs=1, tasks=20, max_tasks=40)
    run = Run(
        "fleet-largest-t" if args.find_max else "fleet",
        args,
        parser,
        servers=servers_of(args.backends),
        selectors=("find_max", "runs") if args.find_max else (),
    )
    print(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.1f}")
    print(HEADER)
    if args.find_max:
        found = [
            find_max(b, args.tasks, args.nodes, args.seconds, args.warmup, args.max_tasks)
            for b in args.backends
        ]
        table = Table("Largest T meeting the goal", SIZE_COLUMNS)
        table.rows = [size_row(f) for f in found]
        run.write(
            "Largest T meeting the fleet goal",
            [table],
            found,
            notes=[
                f"T locked one-second tasks on {args.nodes} resident nodes, one "
                f"{args.seconds} s run per size: T doubles from {args.tasks} until a run "
                "misses the goal (a fire missed or duplicated, or a lateness p99 of 250 ms "
                "or more), then bisects.",
                "The SQL history backends start each run as a fleet back from a 1 s outage "
                "(`--outage`), so no run pays a catch-up of an earlier run's fires.",
            ],
        )
        return
    by_backend: dict[str, list[Result]] = {backend: [] for backend in args.backends}
    for _ in range(args.runs):
        for backend in args.backends:
            result = run_fleet(
                backend,
                args.tasks,
                args.nodes,
                args.seconds,
                args.warmup,
                outage=outage_of(backend, args.outage),
                max_workers=args.max_workers,
            )
            by_backend[backend].append(result)
            print(result.row(), flush=True)
    table = Table(
        f"{args.tasks} locked one-second tasks on {args.nodes} nodes",
        RUN_COLUMNS,
        align="llllllllr",
    )
    table.rows = [run_row(results) for results in by_backend.values()]
    run.write(
        "Fires per second per node",
        [table],
        [summarise(results) for results in by_backend.values()],
        notes=[
            f"{args.runs} round(s) over the backends, one {args.seconds} s window per run once "
            f"every node fired and {args.warmup} s more passed; every node attempts every fire.",
            "ran, duplicates and missed come from the bodies' witness lines; the reasons of "
            "the misses from the nodes' fire logs. Lateness: body start minus the fire's "
            "instant. CPU: the nodes' user + system time in the window over their fire "
            "attempts, and over the fires run.",
            "The SQL history backends start each run as a fleet back from a 1 s outage "
            "(`--outage`), so no run pays a catch-up of an earlier run's fires.",
        ],
    )


if __name__ == "__main__":
    main()
