"""Median µs per acquire+release cycle: every adapter, its raw-driver floor, and peers.

All cases run in ONE process, in interleaved rounds (a fresh random order each
round), so a noisy neighbour slows every case alike and the ratios stay
meaningful. The floor of a backend is its raw driver sending exactly the
statements the adapter sends for one cycle, on one reused connection; the ratio
adapter / floor is our overhead. Peers are measured the same way.

Peers are installed only for this script (`uv sync --all-packages --group bench`),
never as dependencies. Servers come from the same `FIREFLY_TEST_*_URL` variables
as the tests (defaults: the local servers). The figures go to `docs/results/locks.md`
and `locks.json` (see `benchmark_results`). The cases are in `lock_cases_sql` and
`lock_cases_kv`, on the shared `lock_case`. Run:

    uv run --group bench python benchmarks/locks.py [--rounds 15] [--cycles 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary
from lock_case import Case
from lock_cases_kv import etcd_cases, memcached_cases, redis_cases
from lock_cases_sql import database_cases, mysql_cases, postgres_cases

# -- harness --------------------------------------------------------------------------------

SUITES: dict[str, Callable[[ExitStack], Iterator[Case]]] = {
    "postgres": postgres_cases,
    "mysql": mysql_cases,
    "redis": redis_cases,
    "memcached": memcached_cases,
    "etcd": etcd_cases,
    "database": database_cases,
}


@contextmanager
def gathered(selected: list[str]) -> Iterator[list[Case]]:
    with ExitStack() as stack:
        cases: list[Case] = []
        for suite in selected:
            try:
                cases.extend(SUITES[suite](stack))
            except Exception as err:  # noqa: BLE001 - report and go on with the other suites
                print(f"# {suite}: not measured ({type(err).__name__}: {err})")
        yield cases


def measure(cases: list[Case], rounds: int, cycles: int) -> None:
    for case in cases:  # warm up connections, statement caches, script SHAs
        for _ in range(max(10, cycles // 10)):
            case.cycle()
    for _ in range(rounds):
        for case in random.sample(cases, len(cases)):
            started = time.perf_counter()
            for _ in range(cycles):
                case.cycle()
            case.samples.append((time.perf_counter() - started) / cycles * 1e6)


COLUMNS = [
    "backend",
    "implementation",
    "role",
    "µs per cycle, median (range) over rounds",
    "ratio to floor",
]
ROLE_ORDER = {"adapter": 0, "floor": 1, "peer": 2}


def figures(cases: list[Case]) -> list[dict[str, object]]:
    floors = {c.backend: statistics.median(c.samples) for c in cases if c.role == "floor"}
    every: list[dict[str, object]] = []
    for case in sorted(cases, key=lambda c: (c.backend, ROLE_ORDER[c.role], c.label)):
        median = statistics.median(case.samples)
        floor = floors.get(case.backend)
        every.append(
            {
                "backend": case.backend,
                "implementation": case.label,
                "role": case.role,
                "microseconds_per_cycle": summary(case.samples),
                "ratio_to_floor": median / floor if floor else None,
            }
        )
    return every


def report(every: list[dict[str, Any]]) -> Table:
    table = Table("Acquire + release cycle, uncontended", COLUMNS, align="lllrr")
    for figure in every:
        cycle = figure["microseconds_per_cycle"]
        samples = [cycle["min"], cycle["median"], cycle["max"]]
        ratio = figure["ratio_to_floor"]
        table.rows.append(
            [
                figure["backend"],
                figure["implementation"],
                figure["role"],
                spread(samples if cycle["runs"] > 1 else samples[1:2], 0),
                "n/a" if ratio is None else f"{ratio:.2f}",
            ]
        )
    print("| " + " | ".join(COLUMNS) + " |")
    for cells in table.rows:
        print("| " + " | ".join(cells) + " |")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--only", action="append", choices=sorted(SUITES), default=None)
    add_arguments(parser)
    args = parser.parse_args()
    shorten(args, parser, rounds=2, cycles=20)
    selected = args.only or list(SUITES)
    run = Run("locks", args, parser, servers=servers_of(selected), uv_groups=("bench",))
    with gathered(selected) as cases:
        measure(cases, args.rounds, args.cycles)
        every = figures(cases)
    run.write(
        "Lock cycle: adapters, raw-driver floors and peers",
        [report(every)],
        every,
        notes=[
            f"Every case in one process, {args.rounds} interleaved rounds of {args.cycles} "
            "cycles (a fresh random order each round); median and range of the rounds.",
            "floor: the raw driver sending the statements the adapter sends for one cycle, "
            "on one reused connection; ratio to floor is the adapter's (or peer's) overhead. "
            "Peers are measured only when installed (`uv sync --all-packages --group bench`).",
        ],
    )


if __name__ == "__main__":
    main()
