"""The concurrency rules of the lock contract: never two holders at once, under load.

Coroutines on one event loop (asyncio), threads and processes (synchronous) race for
the same names; a shared instance is safe across them; the two flavours exclude each
other; a cancelled acquisition leaves nothing behind. Part of `AsyncLockContract`.
Written once, for asyncio; `testing/concurrency_contract.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncConcurrencyContract ConcurrencyContract
# async-to-sync: rename AsyncNodeFixtures NodeFixtures

from __future__ import annotations

import asyncio  # sync: drop
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.port import DistributedLock, LockCapabilities
from firefly_scheduling.testing.hostile_async import AsyncLockFactory
from firefly_scheduling.testing.nodes_async import (
    EXPIRY_SLACK_SECONDS,
    AsyncNodeFixtures,
    AsyncNodes,
)
from firefly_scheduling.testing.workers import (
    child_processes,
    default_stop_signals,
    exclusive_file_worker,
)


class AsyncConcurrencyContract(AsyncNodeFixtures):
    """Many callers at once, on one instance or many: never two inside."""

    if ASYNC:

        async def test_coroutine_fuzz_has_no_overlap(self, nodes: AsyncNodes, name: str) -> None:
            """Many coroutines on several instances, one event loop: never two inside."""
            tasks, iterations = 16, 100
            names = [name + ":0", name + ":1"]
            inside = dict.fromkeys(names, 0)
            overlaps: list[str] = []
            won = [0] * tasks
            locks = [nodes() for _ in range(tasks // 2)]

            async def run(index: int) -> None:
                lock = locks[index % len(locks)]
                for iteration in range(iterations):
                    lock_name = names[(index + iteration) % 2]
                    if not await lock.try_acquire(lock_name, 30):
                        await asyncio.sleep(0)
                        continue
                    try:
                        won[index] += 1
                        seen = inside[lock_name]
                        inside[lock_name] = seen + 1
                        if seen != 0:
                            overlaps.append(lock_name)
                        await asyncio.sleep(0)  # let every other coroutine try meanwhile
                        inside[lock_name] -= 1
                    finally:
                        await lock.release(lock_name)

            await asyncio.wait_for(asyncio.gather(*(run(i) for i in range(tasks))), 120)
            assert overlaps == []
            assert sum(won) > 0

        async def test_shared_instance_is_safe_across_coroutines(
            self, nodes: AsyncNodes, name: str
        ) -> None:
            lock = nodes()
            winners: list[int] = []
            inside = [0]
            overlaps = [0]

            async def run(index: int) -> None:
                for _ in range(50):
                    if await lock.try_acquire(name, 30):
                        try:
                            winners.append(index)
                            inside[0] += 1
                            if inside[0] != 1:
                                overlaps[0] += 1
                            await asyncio.sleep(0)
                            inside[0] -= 1
                        finally:
                            await lock.release(name)
                    await asyncio.sleep(0)

            await asyncio.wait_for(asyncio.gather(*(run(i) for i in range(100))), 120)
            assert overlaps[0] == 0
            assert winners

        async def test_the_sync_and_async_flavours_exclude_each_other(
            self,
            nodes: AsyncNodes,
            sync_lock_factory: Callable[[], DistributedLock],
            name: str,
        ) -> None:
            """A fleet may mix sync and async nodes: one name is one lock for both."""
            lock, other = nodes(), sync_lock_factory()
            try:
                assert await lock.try_acquire(name, 30)
                assert await asyncio.to_thread(other.try_acquire, name, 30) is False
                await lock.release(name)
                assert await asyncio.to_thread(other.try_acquire, name, 30)
                assert await lock.try_acquire(name, 30) is False
                await asyncio.to_thread(other.release, name)
                assert await lock.try_acquire(name, 30)
                await lock.release(name)
            finally:
                close = getattr(other, "close", None)
                if callable(close):
                    await asyncio.to_thread(close)

        async def test_a_cancelled_acquire_frees_nothing_and_keeps_nothing(
            self, nodes: AsyncNodes, capabilities: LockCapabilities, name: str
        ) -> None:
            """Cancelling a coroutine that awaits an acquisition (a timeout, a shutdown).

            The acquisition either won (and the caller, gone, releases nothing) or not;
            either way the name must end up free and every other holding of the same
            instance must stay held. Session backends are where this bites: a driver
            cancelled mid-reply closes its connection (asyncmy), which ends the session
            and frees every lock of it, or leaves a server lock no holding owns
            (psycopg). On a lease backend a lease the server granted to a cancelled
            caller belongs to no one and is freed when its (short) TTL passes: the case
            then waits for that, and checks the rest alike.
            """
            session = capabilities.session_scoped
            ttl = 30.0 if session else 1.0
            lock, other = nodes(), nodes()
            held = name + ":held"
            assert await lock.try_acquire(held, 30)
            attempts: list[tuple[str, Callable[[str], Any]]] = [
                ("plain", lambda attempt: lock.try_acquire(attempt, ttl))
            ]
            if capabilities.fenced:
                fenced: Any = lock
                attempts.append(("fenced", lambda attempt: fenced.try_acquire_fenced(attempt, ttl)))
            left: list[str] = []
            for kind, acquire in attempts:
                for yields in range(1, 8):
                    attempt = f"{name}:{kind}:{yields}"
                    task = asyncio.ensure_future(acquire(attempt))
                    for _ in range(yields):
                        await asyncio.sleep(0)
                    task.cancel()
                    try:
                        won = await task
                    except asyncio.CancelledError:
                        won = None
                    if won:  # it finished before the cancellation landed: an ordinary win
                        await lock.release(attempt)
                    left.append(attempt)
            deadline = time.monotonic() + (0.0 if session else ttl + EXPIRY_SLACK_SECONDS)
            for attempt in left:
                while not await other.try_acquire(attempt, 30):
                    assert time.monotonic() < deadline, (
                        f"the cancelled acquisition of {attempt!r} kept it"
                        + ("" if session else " past its TTL")
                    )
                    await asyncio.sleep(0.05)
                await other.release(attempt)
            assert await other.try_acquire(held, 30) is False, "a cancellation freed a holding"
            assert await lock.try_acquire(name + ":after", 30), "the instance no longer works"
            await lock.release(name + ":after")
            await lock.release(held)
            assert await other.try_acquire(held, 30)
            await other.release(held)

    else:

        def test_thread_fuzz_has_no_overlap(self, nodes: AsyncNodes, name: str) -> None:
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

        def test_shared_instance_is_thread_safe(self, nodes: AsyncNodes, name: str) -> None:
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
            lock_factory: AsyncLockFactory,
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
