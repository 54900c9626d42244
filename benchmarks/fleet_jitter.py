"""`benchmarks/fleet.py --jitter`: what `jitter=` does to a fleet's claim burst.

T tasks on `cron="* * * * *"` (default 2,000) x N nodes (default 2) fire in the same
second every minute: each node sends T claims at once. With `jitter="30s"` each fire
starts at its instant plus its own offset in [0, 30 s), so the same claims are spread
over 30 s. Each round runs, per backend, one fleet of each variant (the order of the
two swaps every round) for `--minutes` whole minutes, and counts (`fleet_cron`):
fires run, missed and duplicated; the server's time per claim request
(`fleet_server_claims`: Redis `SLOWLOG`, PostgreSQL's statement log); the nodes'
wait for their claims (the fire logs); the most claims the server served in one
second; how far after its instant each body started. Rounds give median and range.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

from benchmark_results import Run, Table, servers_of, spread, summary
from firefly_scheduling.settings import DEFAULT_GRACE_SECONDS
from fleet_cron import HEADER, CronResult, run_cron_fleet

#: The backends the jitter comparison runs on by default: the ones with a server probe.
JITTER_BACKENDS = ("redis", "postgres")
JITTER_TASKS = 2000

COLUMNS = [
    "backend",
    "variant",
    "ran (of expected), per round",
    "duplicates / missed, per round",
    "server claim p99, ms",
    "server requests / claims per round (median)",
    "client claim p99, ms",
    "peak claims per second",
    "body start after instant p99, s",
    "load average, per round",
]


def add_jitter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jitter",
        action="store_true",
        help="cron fleets with and without jitter= (docs/results/fleet_jitter.md)",
    )
    parser.add_argument(
        "--minutes", type=int, default=1, help="--jitter: whole minutes per fleet (fires per task)"
    )
    parser.add_argument(
        "--jitter-seconds", type=int, default=30, help="--jitter: the jitter of the jittered fleet"
    )
    parser.add_argument(
        "--postgres-log",
        type=Path,
        metavar="FILE",
        help="--jitter: the PostgreSQL server's log (default: a local server's stderr)",
    )


def run_jitter(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if not 0 < args.jitter_seconds < 60:
        parser.error(f"--jitter-seconds {args.jitter_seconds}: must be 1 to 59 (a minute's cron)")
    if args.minutes < 1:
        parser.error(f"--minutes {args.minutes}: must be at least 1")
    run = Run(
        "fleet_jitter", args, parser, servers=servers_of(args.backends), selectors=("jitter",)
    )
    print(HEADER)
    variants: list[int | None] = [None, args.jitter_seconds]
    results: dict[tuple[str, int | None], list[CronResult]] = {
        (backend, variant): [] for backend in args.backends for variant in variants
    }
    for round_ in range(args.runs):
        for backend in args.backends:
            for variant in variants if round_ % 2 == 0 else variants[::-1]:
                result = run_cron_fleet(
                    backend,
                    args.tasks,
                    args.nodes,
                    args.minutes,
                    variant,
                    grace=DEFAULT_GRACE_SECONDS,
                    postgres_log=args.postgres_log,
                )
                results[(backend, variant)].append(result)
                print(result.row(), flush=True)
    table = Table(
        f"{args.tasks:,} locked `* * * * *` tasks on {args.nodes} nodes, "
        f'with and without `jitter="{args.jitter_seconds}s"`',
        COLUMNS,
        align="llllllllrl",
    )
    table.rows = [row(rounds) for rounds in results.values()]
    run.write(
        "Jitter: the claim burst of a fleet's cron minute",
        [table],
        [summarise(rounds) for rounds in results.values()],
        notes=notes(args),
    )


def row(rounds: Sequence[CronResult]) -> list[str]:
    first = rounds[0]
    requests = statistics.median(r.server_requests for r in rounds)
    claims = statistics.median(r.server_claims for r in rounds)
    server = "-" if first.server_claim_ms is None else f"{requests:,.0f} / {claims:,.0f}"
    incomplete = sum(not r.server_log_complete for r in rounds)
    if incomplete:
        server += f" (the server's log dropped entries in {incomplete} round(s))"
    return [
        first.backend,
        first.variant,
        ", ".join(f"{r.ran:,}" for r in rounds) + f" (of {first.expected:,})",
        ", ".join(f"{r.duplicates} / {r.missed}" for r in rounds),
        _spread([r.server_claim_ms[1] for r in rounds if r.server_claim_ms], 3),
        server,
        _spread([r.client_claim_ms[1] for r in rounds], 1),
        _spread([float(r.peak_claims_per_second or 0) for r in rounds], 0)
        if first.peak_claims_per_second is not None
        else "-",
        _spread([r.start_after_instant_s[1] for r in rounds], 1),
        ", ".join(f"{r.load:.1f}" for r in rounds),
    ]


def _spread(values: list[float], digits: int) -> str:
    shown = [value for value in values if not math.isnan(value)]
    return f"**{spread(shown, digits, thousands=True)}**" if shown else "-"


def summarise(rounds: Sequence[CronResult]) -> dict[str, object]:
    first = rounds[0]
    return {
        "backend": first.backend,
        "variant": first.variant,
        "jitter_seconds": first.jitter,
        "tasks": first.tasks,
        "nodes": first.nodes,
        "minutes_per_round": first.minutes,
        "rounds": [r.figures() for r in rounds],
        "missed": sum(r.missed for r in rounds),
        "duplicates": sum(r.duplicates for r in rounds),
        "server_claim_p99_ms": summary([r.server_claim_ms[1] for r in rounds if r.server_claim_ms]),
        "client_claim_p99_ms": summary([r.client_claim_ms[1] for r in rounds]),
        "peak_claims_per_second": summary(
            [
                float(r.peak_claims_per_second)
                for r in rounds
                if r.peak_claims_per_second is not None
            ]
        ),
        "start_after_instant_p99_s": summary([r.start_after_instant_s[1] for r in rounds]),
    }


def notes(args: argparse.Namespace) -> list[str]:
    return [
        f"{args.runs} round(s); in each, per backend, one fleet without jitter and one with "
        f'`jitter="{args.jitter_seconds}s"` (the order swaps every round), each for '
        f"{args.minutes} whole minute(s) from the first minute after every node started: "
        f"{args.runs * args.minutes} fire(s) of every task per variant in all. Median "
        "(range) over the rounds.",
        "ran, duplicates and missed come from the bodies' witness lines (one per body run).",
        "Server claim: the time the server spent on each claim request, p99 over the round. "
        "Redis: `SLOWLOG` at a threshold of 0 (execution time of each claim's "
        "`SET NX PX`, in µs: a batch is a pipeline of such commands, each timed alone). "
        "PostgreSQL: `pg_stat_statements` is not loaded on this server (it needs a "
        "restart), so `log_min_duration_statement = 0` is set on the benchmark's "
        "database only while a fleet runs, and each claim statement's parse + bind + "
        "execute is read from the server's log (a batch of claims is one statement). "
        "Logging every statement costs the server a line per statement, in both variants.",
        "Server requests / claims: claim requests the server timed, and the fire claims "
        "they carried (2 nodes x tasks x minutes when every claim is seen).",
        "Client claim: how long each node waited for each fire's claim (`claim_seconds` "
        "in its fire log; the batch's round trip when the claims of one instant went "
        "together), p99 over every claim of the round.",
        "Peak claims per second: the most fire claims the server served in one wall-clock "
        "second of the round (by the server's own log times).",
        "Body start after instant: when each body started, after its fire's instant: "
        "the spread the jitter buys (and, without jitter, how long the burst takes to "
        "drain).",
        "Load average: the machine's 1-minute load average as each fleet's window began "
        "(2 cores, shared with other work: the client-side figures move with it).",
    ]
