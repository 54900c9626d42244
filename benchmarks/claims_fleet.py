"""A fleet of claiming processes for `benchmarks/claims.py`: P forked processes of T threads.

Each process builds its claimers (`claim_drivers`), warms every thread's connection,
waits for the whole fleet at a barrier, then claims fresh fire names for the window;
the fleet's result sums claims/s, CPU per claim and the connections held.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Barrier
from typing import Any

import psutil

from claim_drivers import adapter_claims, adapter_lock, raw_claims, require, server_port
from firefly_scheduling.fires.claims import claim_name

# -- one process of the fleet ------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    backend: str
    flavour: str  # "adapter" or "raw"
    seconds: float
    threads: int
    claim_seconds: float
    sqlite_path: str
    prefix: str


@dataclass(frozen=True)
class ProcessResult:
    claims: int
    errors: int
    elapsed: float
    cpu: float
    connections: int


def fire_names(target: str) -> Iterator[str]:
    """Claim names of successive fires of `target`, one microsecond apart: all distinct."""
    start = datetime.now(UTC)
    for step in range(sys.maxsize):
        yield claim_name(target, target, start + timedelta(microseconds=step))


def run_process(job: Job, index: int, barrier: Barrier, results: Any) -> None:
    """Build the claimers, warm every thread's connection, wait for the fleet, claim."""
    os.environ["FIREFLY_BENCH_CLAIM_SECONDS"] = str(job.claim_seconds)
    with ExitStack() as stack:
        build = adapter_claims if job.flavour == "adapter" else raw_claims
        factory = build(stack, job.backend, job.sqlite_path)
        claimers = [factory() for _ in range(job.threads)]
        names = [fire_names(f"{job.prefix}.{index}.{thread}") for thread in range(job.threads)]
        for claim, thread_names in zip(claimers, names, strict=True):
            claim(next(thread_names))  # opens the thread's connection; refusals count later
        counts = [0] * job.threads
        port = server_port(job.backend)
        peak = [count_connections(port)]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.05):
                peak[0] = max(peak[0], count_connections(port))

        errors = [0] * job.threads
        failures: list[BaseException] = []

        def work(thread: int, stop_at: float) -> None:
            """Claim until `stop_at`. Nothing contends, so a claim not won is a failure of
            the backend: an error (a SQLite busy timeout is one), or a refusal. Both are
            counted; each thread shows its first."""
            claim, thread_names = claimers[thread], names[thread]
            try:
                while time.monotonic() < stop_at:
                    name = next(thread_names)
                    try:
                        won = claim(name)
                    except Exception as err:  # noqa: BLE001 - counted and shown once
                        won, why = False, repr(err)
                    else:
                        why = f"the uncontended claim {name} was refused"
                    if won:
                        counts[thread] += 1
                        continue
                    if not errors[thread]:
                        print(f"{job.backend} {job.flavour}: {why}", file=sys.stderr)
                    errors[thread] += 1
            except BaseException as err:  # reported by the process, not lost with the thread
                failures.append(err)
                raise

        barrier.wait()
        cpu_start, started = time.process_time(), time.monotonic()
        stop_at = started + job.seconds
        workers = [threading.Thread(target=work, args=(t, stop_at)) for t in range(job.threads)]
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_start
        done.set()
        sampler.join()
        if failures:
            raise failures[0]
        results.put(ProcessResult(sum(counts), sum(errors), elapsed, cpu, peak[0]))


def count_connections(port: int | None) -> int:
    """TCP connections this process holds to the server's port."""
    if port is None:
        return 0
    connections = psutil.Process().net_connections(kind="tcp")
    return sum(1 for c in connections if c.raddr and c.raddr.port == port)


# -- the fleet -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetResult:
    claims_per_second: float
    errors: int
    cpu_ms_per_claim: float
    connections: int


def run_fleet(job: Job, processes: int) -> FleetResult:
    # Forked: a spawned child re-imports everything, which takes tens of seconds on a
    # loaded machine. The parent holds no connection and runs no thread at this point.
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(processes + 1)
    results = context.Queue()
    children = [
        context.Process(target=run_process, args=(job, index, barrier, results))
        for index in range(processes)
    ]
    for child in children:
        child.start()
    try:
        barrier.wait(timeout=300)
        collected: list[ProcessResult] = []
        while len(collected) < processes:
            try:
                collected.append(results.get(timeout=1.0))
            except queue.Empty:
                failed = [child.exitcode for child in children if child.exitcode]
                require(not failed, f"{job.backend} {job.flavour}: a process failed ({failed})")
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.terminate()
    require(all(child.exitcode == 0 for child in children), f"{job.backend}: a process failed")
    claims = sum(result.claims for result in collected)
    return FleetResult(
        claims_per_second=sum(result.claims / result.elapsed for result in collected),
        errors=sum(result.errors for result in collected),
        cpu_ms_per_claim=1000 * sum(result.cpu for result in collected) / max(claims, 1),
        connections=max(result.connections for result in collected),
    )


def prepare(backend: str, sqlite_path: str) -> None:
    """Create the claim tables once, before any timed window (a first claim does it)."""
    os.environ["FIREFLY_BENCH_CLAIM_SECONDS"] = "1"
    with ExitStack() as stack:
        lock = adapter_lock(backend, sqlite_path)
        stack.callback(lock.close)
        if backend.startswith("database-"):
            lock.install()
        from firefly_scheduling.locks.port_holdings import claiming_lock  # noqa: PLC0415

        name = claim_name(f"bench.claims.{uuid.uuid4().hex}", "x", datetime.now(UTC))
        require(claiming_lock(lock).try_claim(name, 1.0), f"{backend}: the first claim lost")
