"""asyncio adapters: µs per cycle against the raw async driver, and claims per second.

Two measurements per backend, both in ONE process and ONE run:

1. **Latency ratio.** Median µs per acquire+release cycle of each async adapter,
   next to its raw async driver sending exactly the same round trips on one reused
   connection (the floor), in interleaved rounds (a fresh random order each round),
   so a noisy neighbour slows every case alike. Ratio = adapter / floor.
2. **Throughput.** 100 concurrent coroutines sharing one adapter instance (one
   connection or pool) each claim distinct names for `--seconds`; reported as
   claims per second, next to the synchronous adapter driven by 100 threads
   sharing one instance.

Each backend lives in `benchmarks/async_suites/<backend>.py`, which defines
`cases(stack) -> list[AsyncCase]` (an `AsyncExitStack` closes what it opens) and
`pair() -> (async_factory, sync_factory)` for the throughput run. The figures go to
`docs/results/async_locks.md` and `async_locks.json` (see `benchmark_results`). Run:

    uv run --group bench python benchmarks/async_locks.py [--rounds 15] [--cycles 200]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import pkgutil
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark_results import Run, Table, add_arguments, servers_of, shorten, spread, summary

AsyncCycle = Callable[[], Awaitable[None]]
SUITES_DIR = Path(__file__).resolve().parent / "async_suites"


@dataclass
class AsyncCase:
    backend: str
    label: str
    role: str  # "adapter" or "floor"
    cycle: AsyncCycle
    samples: list[float] = field(default_factory=list)


def unique(prefix: str) -> str:
    return f"bench:{prefix}:{uuid.uuid4().hex[:8]}"


def lock_cycle(lock: Any, name: str, ttl: float = 30.0) -> AsyncCycle:
    """One cycle of any AsyncDistributedLock: acquire (must win) then release."""

    async def cycle() -> None:
        if not await lock.try_acquire(name, ttl):
            raise RuntimeError(f"{lock!r} did not win uncontended {name!r}")
        await lock.release(name)

    return cycle


def suites() -> dict[str, Any]:
    """backend name -> its suite module, one per file in `async_suites/`."""
    found = {}
    for info in pkgutil.iter_modules([str(SUITES_DIR)]):
        found[info.name] = importlib.import_module(f"async_suites.{info.name}")
    return found


async def measure(cases: list[AsyncCase], rounds: int, cycles: int) -> None:
    for case in cases:  # warm up connections, statement caches, script SHAs
        for _ in range(max(10, cycles // 10)):
            await case.cycle()
    for _ in range(rounds):
        for case in random.sample(cases, len(cases)):
            started = time.perf_counter()
            for _ in range(cycles):
                await case.cycle()
            case.samples.append((time.perf_counter() - started) / cycles * 1e6)


async def async_claims_per_second(lock: Any, workers: int, seconds: float) -> float:
    """Claims (acquire of a fresh name) per second by `workers` coroutines on one lock."""
    prefix = unique("athroughput")
    deadline = time.perf_counter() + seconds
    counts = [0] * workers

    async def worker(index: int) -> None:
        while time.perf_counter() < deadline:
            name = f"{prefix}:{index}:{counts[index]}"
            if not await lock.try_acquire(name, 30.0):
                raise RuntimeError(f"lost uncontended {name!r}")
            await lock.release(name)
            counts[index] += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(workers)))
    return sum(counts) / (time.perf_counter() - started)


def threaded_claims_per_second(lock: Any, workers: int, seconds: float) -> float:
    """The same load on the synchronous adapter, one thread per worker."""
    prefix = unique("throughput")
    deadline = time.perf_counter() + seconds
    counts = [0] * workers

    def worker(index: int) -> None:
        while time.perf_counter() < deadline:
            name = f"{prefix}:{index}:{counts[index]}"
            if not lock.try_acquire(name, 30.0):
                raise RuntimeError(f"lost uncontended {name!r}")
            lock.release(name)
            counts[index] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


LATENCY_COLUMNS = [
    "backend",
    "implementation",
    "role",
    "µs per cycle, median",
    "ratio to floor, median (range) over rounds",
]
THROUGHPUT_COLUMNS = ["backend", "async claims/s", "sync claims/s", "async / sync"]


def latency_figures(cases: list[AsyncCase]) -> list[dict[str, Any]]:
    floors = {c.backend: c for c in cases if c.role == "floor"}
    every: list[dict[str, Any]] = []
    for case in sorted(cases, key=lambda c: (c.backend, c.role != "adapter", c.label)):
        floor = floors.get(case.backend)
        ratios = (
            [a / f for a, f in zip(case.samples, floor.samples, strict=True)]
            if floor is not None
            else []
        )
        every.append(
            {
                "backend": case.backend,
                "implementation": case.label,
                "role": case.role,
                "microseconds_per_cycle": summary(case.samples),
                "ratio_to_floor": summary(ratios) if ratios else None,
            }
        )
    return every


def latency_table(every: list[dict[str, Any]]) -> Table:
    table = Table("Acquire + release cycle, uncontended", LATENCY_COLUMNS, align="lllrr")
    for figure in every:
        ratio = figure["ratio_to_floor"]
        table.rows.append(
            [
                figure["backend"],
                figure["implementation"],
                figure["role"],
                f"{figure['microseconds_per_cycle']['median']:.0f}",
                "n/a" if ratio is None else spread(_values(ratio), 2),
            ]
        )
    print("| " + " | ".join(LATENCY_COLUMNS) + " |")
    for cells in table.rows:
        print("| " + " | ".join(cells) + " |")
    return table


def _values(cell: dict[str, Any]) -> list[float]:
    return [cell["min"], cell["median"], cell["max"]] if cell["runs"] > 1 else [cell["median"]]


async def latency(selected: dict[str, Any], rounds: int, cycles: int) -> list[dict[str, Any]]:
    async with AsyncExitStack() as stack:
        cases: list[AsyncCase] = []
        for name, suite in selected.items():
            try:
                cases.extend(await suite.cases(stack))
            except Exception as err:  # noqa: BLE001 - report and go on with the others
                print(f"# {name}: not measured ({type(err).__name__}: {err})")
        await measure(cases, rounds, cycles)
        return latency_figures(cases)


def throughput(selected: dict[str, Any], workers: int, seconds: float) -> list[dict[str, Any]]:
    every: list[dict[str, Any]] = []
    print("\n| " + " | ".join(THROUGHPUT_COLUMNS) + " |")
    for name, suite in selected.items():
        make_async, make_sync = suite.pair()

        async def run_async(make_async: Any = make_async) -> float:
            lock = make_async()
            try:
                return await async_claims_per_second(lock, workers, seconds)
            finally:
                await lock.aclose()

        coroutines = asyncio.run(run_async())
        sync_lock = make_sync()
        try:
            threads = threaded_claims_per_second(sync_lock, workers, seconds)
        finally:
            sync_lock.close()
        every.append(
            {
                "backend": name,
                "async_claims_per_second": coroutines,
                "sync_claims_per_second": threads,
                "async_over_sync": coroutines / threads,
            }
        )
        print(f"| {name} | {coroutines:,.0f} | {threads:,.0f} | {coroutines / threads:.2f} |")
    return every


def main() -> None:
    available = suites()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--only", action="append", choices=sorted(available), default=None)
    parser.add_argument("--skip-throughput", action="store_true")
    add_arguments(parser)
    args = parser.parse_args()
    shorten(args, parser, rounds=2, cycles=20, workers=10, seconds=0.5)
    selected = {name: available[name] for name in (args.only or sorted(available))}
    run = Run("async_locks", args, parser, servers=servers_of(selected), uv_groups=("bench",))
    latencies = asyncio.run(latency(selected, args.rounds, args.cycles))
    tables = [latency_table(latencies)]
    rates: list[dict[str, Any]] = []
    if not args.skip_throughput:
        rates = throughput(selected, args.workers, args.seconds)
        tables.append(
            Table(
                f"Claims per second: {args.workers} coroutines on one async lock, "
                f"{args.workers} threads on one sync lock",
                THROUGHPUT_COLUMNS,
                rows=[
                    [
                        r["backend"],
                        f"{r['async_claims_per_second']:,.0f}",
                        f"{r['sync_claims_per_second']:,.0f}",
                        f"{r['async_over_sync']:.2f}",
                    ]
                    for r in rates
                ],
                align="lrrr",
            )
        )
    run.write(
        "asyncio adapters against their raw async drivers",
        tables,
        {"latency": latencies, "throughput": rates},
        notes=[
            f"Latency: every case in one process, {args.rounds} interleaved rounds of "
            f"{args.cycles} cycles; the floor is the raw async driver sending the adapter's "
            "round trips on one reused connection.",
            f"Throughput: each lock claims fresh names for {args.seconds:g} s.",
        ],
    )


if __name__ == "__main__":
    main()
