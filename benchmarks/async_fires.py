"""What an `async def` task costs per fire, on each path a host takes, in one run.

Per fire (a fresh instant each, so every fire claims, takes the task lock fenced and
releases it; no run history), the median time of:

* `sync runner, def body`: `FireRunner` with a plain body (the baseline);
* `sync runner, async body`: the same runner, the body handed to the host's event
  loop thread (`CoroutineLoop`) and waited for: what `run`/`tick` add for an
  `async def` task;
* `asyncio runner, async body`: `AsyncFireRunner` on an asyncio lock, awaited on the
  caller's loop: what the FastAPI lifespan and `register(AsyncIOScheduler)` do.

On the in-memory locks (no I/O: the runner's own overhead) and, when its server
answers, on etcd (`FIREFLY_TEST_ETCD_URL`, sync `EtcdLock` vs `AsyncEtcdLock`).
Medians over `--runs` runs of `--fires` fires, with the range of the run medians.

    uv run python benchmarks/async_fires.py [--fires 200] [--runs 5] [--no-etcd]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmark_results import Run, Table, add_arguments, shorten, spread, summary
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.hosts.runtime.coroutine_loop import CoroutineLoop
from firefly_scheduling.hosts.runtime.task_calls import call_task
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.locks.port import AsyncDistributedLock, DistributedLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor


def _task() -> ScheduledDescriptor:
    name = f"bench-async-{uuid.uuid4().hex[:10]}"
    return ScheduledDescriptor(
        target=f"bench:{name}", fixed_rate=1.0, lock_name=name, lock_ttl=30.0
    )


def _instants(count: int) -> list[datetime]:
    now = datetime.now(UTC)
    # distinct instants within grace, so each fire claims anew
    return [now - timedelta(microseconds=index) for index in range(count)]


def sync_fires(lock: DistributedLock, fires: int, body: Callable[[], object]) -> float:
    """Median seconds per fire of `FireRunner.run`."""
    runner, task = FireRunner(lock, node="bench"), _task()
    took = []
    for instant in _instants(fires):
        started = time.perf_counter()
        outcome = runner.run(Fire.at(task, instant), body)
        took.append(time.perf_counter() - started)
        assert outcome.verdict is Verdict.SUCCEEDED, outcome
    return statistics.median(took)


async def async_fires(
    lock: AsyncDistributedLock, fires: int, body: Callable[[], Awaitable[object]]
) -> float:
    """Median seconds per fire of `AsyncFireRunner.run`."""
    runner, task = AsyncFireRunner(lock, node="bench"), _task()
    took = []
    for instant in _instants(fires):
        started = time.perf_counter()
        outcome = await runner.run(Fire.at(task, instant), body)
        took.append(time.perf_counter() - started)
        assert outcome.verdict is Verdict.SUCCEEDED, outcome
    return statistics.median(took)


async def _coroutine_body() -> None:
    await asyncio.sleep(0)


def _plain_body() -> None:
    return None


def measure(
    label: str,
    sync_lock: Callable[[], DistributedLock],
    async_lock: Callable[[], AsyncDistributedLock],
    fires: int,
    runs: int,
) -> list[dict[str, object]]:
    """Each path's median µs per fire over `runs` runs, and its ratio to the baseline."""
    loop = CoroutineLoop()
    results: dict[str, list[float]] = {
        "sync runner, def body": [],
        "sync runner, async body": [],
        "asyncio runner, async body": [],
    }
    try:
        for _ in range(runs):
            lock = sync_lock()
            try:
                results["sync runner, def body"].append(sync_fires(lock, fires, _plain_body))
                results["sync runner, async body"].append(
                    sync_fires(lock, fires, lambda: call_task(_coroutine_body, loop))
                )
            finally:
                close = getattr(lock, "close", None)
                if callable(close):
                    close()

            async def on_loop() -> float:
                alock = async_lock()
                try:
                    return await async_fires(alock, fires, _coroutine_body)
                finally:
                    await alock.aclose()

            results["asyncio runner, async body"].append(asyncio.run(on_loop()))
    finally:
        loop.close()
    baseline = statistics.median(results["sync runner, def body"])
    print(f"\n{label}: {fires} fires x {runs} runs, median per fire (range of run medians)")
    every: list[dict[str, object]] = []
    for name, medians in results.items():
        median = statistics.median(medians)
        print(
            f"  {name:<28} {median * 1e6:9.1f} us  ({min(medians) * 1e6:.1f} - "
            f"{max(medians) * 1e6:.1f})  x{median / baseline:.2f}"
        )
        every.append(
            {
                "lock": label,
                "path": name,
                "fires": fires,
                "microseconds_per_fire": summary([m * 1e6 for m in medians]),
                "ratio_to_sync_def_body": median / baseline,
            }
        )
    return every


COLUMNS = ["lock", "path", "µs per fire, median (range of run medians)", "ratio to a def body"]


def row(figure: dict[str, Any]) -> list[str]:
    cell = figure["microseconds_per_fire"]
    values = [cell["min"], cell["median"], cell["max"]] if cell["runs"] > 1 else [cell["median"]]
    return [
        figure["lock"],
        figure["path"],
        spread(values, 1),
        f"{figure['ratio_to_sync_def_body']:.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fires", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-etcd", action="store_true")
    add_arguments(parser)
    options = parser.parse_args()
    shorten(options, parser, fires=20, runs=1)
    run = Run("async_fires", options, parser, servers=() if options.no_etcd else ("etcd",))
    every = measure("memory", InMemoryLock, AsyncInMemoryLock, options.fires, options.runs)
    etcd_fires = max(options.fires // 4, 20)
    if not options.no_etcd:
        from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock  # noqa: PLC0415 - optional

        url = os.environ.get("FIREFLY_TEST_ETCD_URL", "etcd://127.0.0.1:2379")
        every += measure(
            "etcd", lambda: EtcdLock(url), lambda: AsyncEtcdLock(url), etcd_fires, options.runs
        )
    run.write(
        "What an async def task costs per fire",
        [Table("Time per fire, by path", COLUMNS, rows=[row(f) for f in every], align="llrr")],
        every,
        notes=[
            f"Each fire claims, takes the task lock fenced and releases it (no run history); "
            f"{options.fires} fires per run on the memory locks, {etcd_fires} on etcd, "
            f"{options.runs} run(s).",
            "sync runner, def body: `FireRunner` with a plain body (the baseline); sync runner, "
            "async body: the body awaited on the host's event loop thread, as `run` and `tick` "
            "do; asyncio runner: `AsyncFireRunner` awaited on the caller's loop, as the "
            "FastAPI lifespan does.",
        ],
    )


if __name__ == "__main__":
    main()
