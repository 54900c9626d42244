"""Per-fire CPU cost of a resident node: a fire it loses, and a fire it runs.

The measured node is a real `firefly-scheduling run` process (the resident host,
the configured provider, its default run history, no fire log) on a generated module
of T locked `fixed_rate="1s"` no-op tasks; its CPU time (user + system, read from
outside through psutil) over a window of whole seconds is divided by the fire
attempts in that window, counted from evidence the node cannot fake:

* **lose**: a "hog" (a thread of this script, with the adapter's own lock) claims
  every fire of the window through `try_claim` 1.5 s before its instant, so every
  attempt of the node loses the claim. The node's attempts are counted on the
  server where the script starts a private one (redis, memcached: the server's own
  command counters, minus the hog's claims sent in the window); on the SQL backends
  they are the window's fires minus the ones the node's run history records as
  skipped (passed over or too late: a fire a node does not attempt is recorded by
  the guarantee). Fires the node still won (the hog came late) count as attempts
  and are shown.
* **win**: the node alone runs every fire; its attempts are the bodies' witness
  lines (one `O_APPEND` write per body, with the fire's instant).

Beside each, the CPU per claim of the raw driver sending the same claim (the
statement of `benchmarks/claims.py`, one connection, this process, a sequential
loop), lost and won, so the ratio says how much of the node's cost is the driver's
own round trip. Where the script runs a private server it also reports the server
commands per attempt (the round trips a fire costs).

Each (backend, mode) runs `--runs` times, lose and win alternating; a row gives the
median and the range. The machine this runs on should be quiet: on a shared one,
the figures are indications. The table also goes to `docs/results/fire_cost.md`
and `fire_cost.json` (see `benchmark_results`). `fire_cost_node` takes one measurement
on the servers of `fire_cost_servers`.

    uv run python benchmarks/fire_cost.py [--backends redis postgres ...] [--tasks 200]
        [--seconds 15] [--runs 3] [--warmup 3]      # every backend by default
    uv run python benchmarks/fire_cost.py --backends redis --modes win
        --profile-dir fire-profiles   # py-spy collapsed stacks of the node, no figures

`--modes insert atomic` (on `database-postgres` only) gives each task a body that
inserts one row in a transaction of its own, without and with `current_fire().atomic`,
and counts every statement on the wire (`fire_cost_bodies`): a second table gives
how many statements each task transaction held, and the statements per fire of the
task's and of the node's connections.

    uv run python benchmarks/fire_cost.py --backends database-postgres --modes insert atomic

`--profile-dir` samples the node with py-spy (`pip install py-spy`, not a project
dependency) over the window instead of measuring it (py-spy's pauses would count).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary
from fire_cost_bodies import BODY_BACKEND, BODY_MODES
from fire_cost_node import HOG_CLAIM_SECONDS, Measure, measure
from fire_cost_servers import private_server
from firefly_scheduling.fires.claims import claim_name

BACKENDS = ("redis", "memcached", "postgres", "database-postgres")
#: Every backend the node can run on here (`fleet_backends.backend_env`'s names).
KNOWN_BACKENDS = (
    *("redis", "redis-cluster", "memcached", "etcd", "postgres", "mysql"),
    *("database-postgres", "database-mysql", "database-sqlite"),
)
#: The raw driver's claim of `benchmarks/claims.py`, by this script's backend name;
#: absent: none there (Redis Cluster), the raw columns then read "-".
RAW_CLAIMS = {
    **{name: name for name in ("redis", "memcached", "etcd", "postgres", "mysql")},
    "database-postgres": "database-postgres",
    "database-mysql": "database-mariadb",
    "database-sqlite": "database-sqlite",
}
#: Backends whose lost attempts cannot be counted: no run history to read the
#: passed-over fires from, and no private server of this script to count commands on.
LOSE_UNCOUNTED = ("etcd", "redis-cluster")
MODES = ("lose", "win")

# -- the raw driver --------------------------------------------------------------------


def raw_cost(backend: str, count: int = 2000) -> tuple[float, float]:
    """CPU ms per lost and per won claim of the raw driver (this process, one thread);
    NaN where `benchmarks/claims.py` has no raw driver for the backend."""
    if backend not in RAW_CLAIMS:
        return math.nan, math.nan
    os.environ["FIREFLY_BENCH_CLAIM_SECONDS"] = str(HOG_CLAIM_SECONDS)
    from claim_drivers import raw_claims  # noqa: PLC0415 - the same statements as the claims bench

    with ExitStack() as stack, private_server(backend) as server:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="fire-cost-raw-"))
        if server.url is not None:
            # `claim_drivers` reads its URLs when imported; point it at the private server.
            import claim_drivers  # noqa: PLC0415

            setattr(claim_drivers, backend.upper(), server.url)
        claim = raw_claims(stack, RAW_CLAIMS[backend], str(Path(scratch) / "raw.sqlite"))()
        prefix = f"fire-cost-raw-{os.getpid()}-{time.time_ns()}"
        taken = claim_name(prefix, prefix, datetime.now(UTC))
        if not claim(taken):
            raise RuntimeError("the raw driver could not take its first claim")
        for _ in range(100):  # warm the connection and the statement
            claim(taken)
        started = time.process_time()
        for _ in range(count):
            if claim(taken):
                raise RuntimeError("a raw claim of a taken name won")
        lose = time.process_time() - started
        names = [
            claim_name(f"{prefix}.{i}", f"{prefix}.{i}", datetime.now(UTC)) for i in range(count)
        ]
        started = time.process_time()
        for name in names:
            if not claim(name):
                raise RuntimeError("a raw claim of a fresh name lost")
        win = time.process_time() - started
    return lose * 1000 / count, win * 1000 / count


# -- the report ------------------------------------------------------------------------------

#: CPU ms per attempt a node should stay within: a lost fire, a won fire.
TARGETS = {"lose": 0.25, "win": 0.75}

COLUMNS = [
    "backend",
    "mode",
    "CPU ms per attempt, median (range)",
    "target",
    "attempts per run",
    "evidence",
    "server commands per attempt",
    "raw driver ms per claim",
    "node / raw",
]


def figures(results: list[Measure], raw: list[float]) -> dict[str, Any]:
    """One (backend, mode) row, machine-readable."""
    first = results[0]
    costs = [r.ms_per_attempt for r in results]
    commands = [c for r in results if (c := r.commands_per_attempt) is not None]
    raw_ms = statistics.median(raw) if raw else math.nan
    finite_raw = not math.isnan(raw_ms)
    target = TARGETS.get(first.mode)
    return {
        "backend": first.backend,
        "mode": first.mode,
        "cpu_ms_per_attempt": summary(costs),
        "target_ms": target,
        "target_met": None if target is None else statistics.median(costs) <= target,
        "task_statements_per_fire": _per_fire(results, "task_statements"),
        "node_statements_per_fire": _per_fire(results, "node_statements"),
        "task_transactions_by_statements": _transactions(results),
        "attempts": [r.attempts for r in results],
        "expected_attempts": first.expected,
        "evidence": first.evidence,
        "hog_late_seconds": sum(r.hog_late for r in results),
        "fires_the_node_won": sum(r.stolen for r in results),
        "server_commands_per_attempt": statistics.median(commands) if commands else None,
        "raw_ms_per_claim": raw_ms if finite_raw else None,
        "node_over_raw": statistics.median(costs) / raw_ms if finite_raw else None,
    }


def _per_fire(results: list[Measure], counted: str) -> float | None:
    """The median over runs of `counted` statements per witnessed fire (body modes)."""
    ratios = [
        sent / max(r.attempts, 1) for r in results if (sent := getattr(r, counted)) is not None
    ]
    return statistics.median(ratios) if ratios else None


def _transactions(results: list[Measure]) -> dict[int, int] | None:
    """The task's transactions of every run, by how many statements each held."""
    total: dict[int, int] = {}
    for r in results:
        for size, count in (r.task_transactions or {}).items():
            total[size] = total.get(size, 0) + count
    return total or None


#: The body modes' table: what `atomic` adds, counted on the wire.
STATEMENT_COLUMNS = [
    "mode",
    "fires per run",
    "task's transactions, by statements held",
    "statements per fire, task's connections",
    "statements per fire, node's connections",
    "CPU ms per fire, median (range)",
]


def statement_row(figure: dict[str, Any]) -> list[str]:
    return [
        figure["mode"],
        f"{'/'.join(map(str, figure['attempts']))} (of {figure['expected_attempts']})",
        ", ".join(
            f"{count} of {size}"
            for size, count in (figure["task_transactions_by_statements"] or {}).items()
        ),
        f"{figure['task_statements_per_fire']:.2f}",
        f"{figure['node_statements_per_fire']:.2f}",
        spread(_costs(figure)),
    ]


def row(figure: dict[str, Any]) -> list[str]:
    evidence = figure["evidence"]
    if figure["hog_late_seconds"]:
        evidence += f" (hog late {figure['hog_late_seconds']} s)"
    if figure["fires_the_node_won"]:
        evidence += f" (the node won {figure['fires_the_node_won']})"
    commands = figure["server_commands_per_attempt"]
    raw, ratio = figure["raw_ms_per_claim"], figure["node_over_raw"]
    met = {None: "-", True: "met", False: "**not met**"}[figure["target_met"]]
    return [
        figure["backend"],
        figure["mode"],
        spread(_costs(figure)),
        "-" if figure["target_ms"] is None else f"≤ {figure['target_ms']}: {met}",
        f"{'/'.join(map(str, figure['attempts']))} (of {figure['expected_attempts']})",
        evidence,
        "-" if commands is None else f"{commands:.2f}",
        "-" if raw is None else f"{raw:.3f}",
        "-" if ratio is None else f"{ratio:.1f}",
    ]


def _costs(figure: dict[str, Any]) -> list[float]:
    cost = figure["cpu_ms_per_attempt"]
    if cost["runs"] == 1:
        return [cost["median"]]
    return [cost["min"], cost["median"], cost["max"]]


def modes_of(backend: str, modes: list[str], explicit: bool) -> list[str]:
    """The modes measured on `backend`: a lost attempt is countable on most backends only."""
    if explicit or backend not in LOSE_UNCOUNTED:
        return modes
    return [mode for mode in modes if mode != "lose"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backends",
        nargs="+",
        default=list(KNOWN_BACKENDS),
        choices=KNOWN_BACKENDS,
        metavar="BACKEND",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        default=None,
        choices=(*MODES, *BODY_MODES),
        help="default: lose and win, win alone where a lost attempt cannot be counted; "
        f"insert and atomic (a body inserting one row, without and with "
        f"current_fire().atomic) on {BODY_BACKEND} only, never by default",
    )
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile-dir", type=Path)
    add_arguments(parser)
    args = parser.parse_args()
    shorten(args, parser, seconds=3, warmup=1, runs=1, tasks=50)
    explicit = args.modes is not None
    modes = args.modes or list(MODES)
    if explicit and "lose" in modes and (bare := sorted(set(args.backends) & set(LOSE_UNCOUNTED))):
        parser.error(
            f"--modes lose counts a node's attempts on a private server (redis, memcached) "
            f"or in its run history, and {bare} have neither: measure them with --modes win"
        )
    if set(modes) & set(BODY_MODES) and set(args.backends) != {BODY_BACKEND}:
        parser.error(
            f"--modes {' '.join(sorted(set(modes) & set(BODY_MODES)))} runs on "
            f"{BODY_BACKEND} alone (lock, history and the task's row in one database): "
            f"pass --backends {BODY_BACKEND}"
        )
    print(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.1f}, ")
    print(f"# {args.tasks} tasks, {args.seconds} s windows, {args.runs} runs\n")
    if args.profile_dir:
        for backend in args.backends:
            for mode in modes_of(backend, modes, explicit):
                measure(backend, mode, args.tasks, args.seconds, args.warmup, args.profile_dir)
        print(f"py-spy stacks in {args.profile_dir}")
        return
    run = Run("fire_cost", args, parser, servers=servers_of(args.backends))
    table = Table("CPU per fire attempt of a resident node", COLUMNS, align="llllrlrrr")
    print("| " + " | ".join(COLUMNS) + " |")
    every: list[dict[str, Any]] = []
    for backend in args.backends:
        measured = modes_of(backend, modes, explicit)
        results: dict[str, list[Measure]] = {mode: [] for mode in measured}
        raw: dict[str, list[float]] = {mode: [] for mode in (*MODES, *BODY_MODES)}
        for _ in range(args.runs):
            for mode in measured:
                results[mode].append(
                    measure(backend, mode, args.tasks, args.seconds, args.warmup, None)
                )
            lose, win = raw_cost(backend)
            raw["lose"].append(lose)
            for won in ("win", *BODY_MODES):
                raw[won].append(win)
        for mode in measured:
            figure = figures(results[mode], raw[mode])
            every.append(figure)
            table.rows.append(row(figure))
            print("| " + " | ".join(table.rows[-1]) + " |", flush=True)
    print(f"\n# load at the end {os.getloadavg()[0]:.1f}")
    tables = [table]
    bodies = [figure for figure in every if figure["mode"] in BODY_MODES]
    if bodies:
        tables.append(
            Table(
                f"Statements per fire of a body inserting one row ({BODY_BACKEND})",
                STATEMENT_COLUMNS,
                rows=[statement_row(figure) for figure in bodies],
                align="lrlrrl",
            )
        )
        print("\n| " + " | ".join(STATEMENT_COLUMNS) + " |")
        for body_row in tables[-1].rows:
            print("| " + " | ".join(body_row) + " |")
    run.write(
        "CPU per fire attempt",
        tables,
        every,
        notes=[
            f"A resident node with {args.tasks} locked one-second tasks; its CPU over "
            f"{args.seconds} s windows divided by its fire attempts, {args.runs} run(s) per row.",
            "lose: another client claimed every fire first; win: the node alone runs every fire; "
            "insert and atomic: the node alone runs every fire, whose body inserts one row in a "
            "transaction of its own, without and with `current_fire().atomic`; their statements "
            "are counted on the wire by a proxy (`benchmarks/pg_statement_counter.py`), each "
            "Query or Execute message one statement, by the connection's application_name.",
            "raw driver: the same claim sent by the bare driver in a loop (the statements of "
            "`benchmarks/claims.py`); node / raw compares the node's cost with it.",
        ],
    )


if __name__ == "__main__":
    main()
