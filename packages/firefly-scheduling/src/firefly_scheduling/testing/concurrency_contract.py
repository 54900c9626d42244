# Generated from concurrency_contract_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The concurrency rules of the lock contract: never two holders at once, under load.

Coroutines on one event loop (asyncio), threads and processes (synchronous) race for
the same names; a shared instance is safe across them; the two flavours exclude each
other; a cancelled acquisition leaves nothing behind. Part of `LockContract`.
Written once, for asyncio; `testing/concurrency_contract.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.testing.hostile import LockFactory
from firefly_scheduling.testing.nodes import (
    NodeFixtures,
    Nodes,
)
from firefly_scheduling.testing.workers import (
    child_processes,
    default_stop_signals,
    exclusive_file_worker,
)


class ConcurrencyContract(NodeFixtures):
    """Many callers at once, on one instance or many: never two inside."""

    def test_thread_fuzz_has_no_overlap(self, nodes: Nodes, name: str) -> None:
        threads, iterations = 8, 200
        names = [name + ":0", name + ":1"]
        inside = dict.fromkeys(names, 0)
        overlaps: list[str] = []
        won = [0] * threads
        locks = [nodes() for _ in range(threads)]
        start = threading.Barrier(threads)

        def run(index: int) -> None:
            lock = locks[index]
            start.wait()
            for iteration in range(iterations):
                lock_name = names[(index + iteration) % 2]
                if not lock.try_acquire(lock_name, 30):
                    continue
                try:
                    won[index] += 1
                    # Deliberately unsynchronised: only the lock keeps this consistent.
                    seen = inside[lock_name]
                    inside[lock_name] = seen + 1
                    if seen != 0:
                        overlaps.append(lock_name)
                    time.sleep(0)
                    inside[lock_name] -= 1
                finally:
                    lock.release(lock_name)

        workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert not any(worker.is_alive() for worker in workers), "thread fuzz did not finish"
        assert overlaps == []
        assert sum(won) > 0

    def test_shared_instance_is_thread_safe(self, nodes: Nodes, name: str) -> None:
        lock = nodes()
        threads, iterations = 8, 100
        winners: list[int] = []
        inside = [0]
        overlaps = [0]
        barrier = threading.Barrier(threads)

        def run(index: int) -> None:
            barrier.wait()
            for _ in range(iterations):
                if lock.try_acquire(name, 30):
                    try:
                        winners.append(index)
                        inside[0] += 1
                        if inside[0] != 1:
                            overlaps[0] += 1
                        time.sleep(0)
                        inside[0] -= 1
                    finally:
                        lock.release(name)

        workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert overlaps[0] == 0
        assert winners

    def test_process_fuzz_has_no_overlap(
        self,
        lock_factory: LockFactory,
        name: str,
        capabilities: LockCapabilities,
        tmp_path: Path,
    ) -> None:
        if not capabilities.cross_process:
            pytest.skip("this backend only excludes threads of one process")
        processes, acquisitions = 8, 200
        witness = tmp_path / "witness"
        witness.write_bytes(b"")
        context = child_processes()
        with context.Pool(processes, initializer=default_stop_signals) as pool:
            results: list[Any] = [
                pool.apply_async(
                    exclusive_file_worker,
                    (lock_factory, name, str(witness), acquisitions, 90.0),
                )
                for _ in range(processes)
            ]
            outcomes = [result.get(timeout=150) for result in results]
        assert sum(overlaps for _, overlaps in outcomes) == 0
        assert [acquired for acquired, _ in outcomes] == [acquisitions] * processes
