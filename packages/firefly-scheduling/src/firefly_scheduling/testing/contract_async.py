"""The lock contract (the port's rules), written once for both flavours.

Written once, for asyncio, in `testing/contract_async.py`; the synchronous contract in
`testing/contract.py` is generated from it by `tools/async_to_sync.py`. A backend
proves its lock by subclassing the contract of its flavour and supplying
`lock_factory`, a picklable callable returning a new, independent instance, as if
on a separate node. The async contract also needs `sync_lock_factory`, the same
backend's synchronous lock, for the case proving the two flavours exclude each
other. Capabilities are read through `capabilities_of`, so each case runs only where
it applies.

Async cases run on a fresh event loop each (`pytest_pyfunc_call` in
`firefly_scheduling.testing`), with no pytest plugin needed; every instance a case
makes is closed on that loop when it ends.
"""

# async-to-sync: rename AsyncWaitingContract WaitingContract

from __future__ import annotations

import asyncio  # sync: drop
import math
import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.hold_async import ahold
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import (
    AsyncBatchAcquiringLock,
    AsyncBatchClaimingLock,
    AsyncClaimingLock,
    AsyncDistributedLock,
    AsyncHoldingLock,
    DistributedLock,
    LockCapabilities,
    capabilities_of,
)
from firefly_scheduling.testing.hostile_async import (
    AsyncHostileNamesContract,
    AsyncLockFactory,
)
from firefly_scheduling.testing.waiting_contract_async import AsyncWaitingContract
from firefly_scheduling.testing.workers import default_stop_signals, exclusive_file_worker

#: Longest a lease backend may take past the TTL to free a lock (memcached rounds TTLs
#: up to whole seconds, and its clock ticks once a second).
EXPIRY_SLACK_SECONDS = 2.5


def _holdings(lock: AsyncDistributedLock) -> AsyncHoldingLock:
    assert isinstance(lock, AsyncHoldingLock), f"{lock!r} hands out no holdings"
    return lock


def _claims(lock: AsyncDistributedLock) -> AsyncClaimingLock:
    assert isinstance(lock, AsyncClaimingLock), f"{lock!r} takes no fire claims"
    return lock


async def _close(lock: object) -> None:
    aclose = getattr(lock, "aclose", None)
    if callable(aclose):
        await aclose()


class AsyncNodes:
    """Makes independent instances (`nodes()`); `close_all()` closes every one made."""

    def __init__(self, factory: AsyncLockFactory) -> None:
        self._factory = factory
        self._made: list[AsyncDistributedLock] = []

    def __call__(self) -> AsyncDistributedLock:
        self._made.append(self._factory())
        return self._made[-1]

    async def close_all(self) -> None:
        for lock in self._made:
            await _close(lock)


class AsyncLockContract(AsyncWaitingContract, AsyncHostileNamesContract):
    """Every rule of the port, proven against a real backend.

    Subclasses provide `lock_factory`. Servers with a network address also provide
    `unreachable_lock`, a fixture returning `(lock, password)` for a lock whose URL
    carries `password` and points at a closed local port, and `server_reader`, a
    second client of the server that the hostile-name cases read it with
    (`AsyncHostileNamesContract`).
    """

    pytestmark = pytest.mark.firefly_asyncio  # sync: drop

    # -- fixtures ---------------------------------------------------------------

    # `lock_factory` (and, asyncio, `sync_lock_factory`) are declared by the hostile-name
    # cases' class, which this one extends.

    if ASYNC:

        @pytest.fixture
        def nodes(self, lock_factory: AsyncLockFactory) -> AsyncNodes:
            """Independent instances, closed on the case's own event loop when it ends."""
            return AsyncNodes(lock_factory)

    else:

        @pytest.fixture
        def nodes(self, lock_factory: AsyncLockFactory) -> Iterator[AsyncNodes]:
            """Independent instances, all closed after the case."""
            made = AsyncNodes(lock_factory)
            yield made
            made.close_all()

    @pytest.fixture
    def capabilities(self, lock_factory: AsyncLockFactory) -> LockCapabilities:
        """What the backend declares (`capabilities_of`); every case checks the claim."""
        return capabilities_of(lock_factory())

    @pytest.fixture
    def name(self, request: pytest.FixtureRequest) -> str:
        """A name no other test (or earlier run against the same server) has used."""
        return f"contract:{request.node.name[:60]}:{uuid.uuid4().hex}"

    # -- exclusion --------------------------------------------------------------

    async def test_acquire(self, nodes: AsyncNodes, name: str) -> None:
        lock = nodes()
        assert await lock.try_acquire(name, 30) is True
        await lock.release(name)

    async def test_second_instance_is_refused(self, nodes: AsyncNodes, name: str) -> None:
        first, second = nodes(), nodes()
        assert await first.try_acquire(name, 30)
        assert await second.try_acquire(name, 30) is False
        await first.release(name)

    async def test_same_instance_is_refused(self, nodes: AsyncNodes, name: str) -> None:
        lock = nodes()
        assert await lock.try_acquire(name, 30)
        assert await lock.try_acquire(name, 30) is False, "a lock must not be re-entrant"
        await lock.release(name)
        assert await nodes().try_acquire(name, 30), "one release must free a once-acquired lock"

    async def test_independent_names(self, nodes: AsyncNodes, name: str) -> None:
        first, second = nodes(), nodes()
        assert await first.try_acquire(name + ":a", 30)
        assert await second.try_acquire(name + ":b", 30)
        assert await first.try_acquire(name + ":b", 30) is False
        await first.release(name + ":a")
        await second.release(name + ":b")

    async def test_release_then_reacquire(self, nodes: AsyncNodes, name: str) -> None:
        first, second = nodes(), nodes()
        assert await first.try_acquire(name, 30)
        await first.release(name)
        assert await second.try_acquire(name, 30)
        assert await first.try_acquire(name, 30) is False
        await second.release(name)
        assert await first.try_acquire(name, 30)
        await first.release(name)

    async def test_release_of_a_name_not_held_is_a_noop(self, nodes: AsyncNodes, name: str) -> None:
        holder, stranger = nodes(), nodes()
        await stranger.release(name)  # held by nobody
        assert await holder.try_acquire(name, 30)
        await stranger.release(name)  # held by someone else
        assert await nodes().try_acquire(name, 30) is False, "a stranger's release freed the lock"
        await holder.release(name)

    async def test_hold_releases_on_exit(self, nodes: AsyncNodes, name: str) -> None:
        first, second = nodes(), nodes()
        async with ahold(first, name, 30) as acquired:
            assert acquired
            async with ahold(second, name, 30) as contended:
                assert not contended
        async with ahold(second, name, 30) as acquired_after:
            assert acquired_after

    # -- TTL --------------------------------------------------------------------

    async def test_ttl_is_honoured_as_the_backend_declares(
        self,
        nodes: AsyncNodes,
        name: str,
        capabilities: LockCapabilities,
    ) -> None:
        """A lease backend frees the lock at the TTL; a session backend keeps it past it.

        Every backend declares one of the two; a late release of an expired lease must
        never free the lease's new holder.
        """
        if capabilities.ttl_honoured:
            await self._check_lease_expiry(nodes, name)
        elif capabilities.session_scoped:
            await self._check_session_survives_ttl(nodes, name)
        else:
            pytest.fail("a backend must declare ttl_honoured or session_scoped")

    @staticmethod
    async def _check_lease_expiry(nodes: AsyncNodes, name: str) -> None:
        old, new, third = nodes(), nodes(), nodes()
        assert await old.try_acquire(name, 1.0)
        assert await new.try_acquire(name, 30) is False
        deadline = time.monotonic() + 1.0 + EXPIRY_SLACK_SECONDS
        while not await new.try_acquire(name, 30):
            assert time.monotonic() < deadline, "the lease was not freed after its TTL"
            await asyncio.sleep(0.05)
        await old.release(name)  # the late release of the expired holder
        assert await third.try_acquire(name, 30) is False, "a late release freed the new holder"
        await new.release(name)
        assert await third.try_acquire(name, 30)
        await third.release(name)

    @staticmethod
    async def _check_session_survives_ttl(nodes: AsyncNodes, name: str) -> None:
        holder, other = nodes(), nodes()
        assert await holder.try_acquire(name, 0.2)
        await asyncio.sleep(0.6)
        assert await other.try_acquire(name, 30) is False, "a session lock expired at its TTL"
        await holder.release(name)
        assert await other.try_acquire(name, 30)
        await other.release(name)

    # -- holdings ---------------------------------------------------------------

    async def test_a_late_release_of_an_older_holding_keeps_the_newer_one(
        self,
        nodes: AsyncNodes,
        name: str,
        capabilities: LockCapabilities,
    ) -> None:
        """Every acquisition is its own holding: an older one's release never frees a newer.

        On a lease backend this is a stalled task: its lease lapses, another
        task of the same process takes the name again, and the first task's `finally`
        must not free it. On a session backend a holding only ends with its session or
        its release, so the older holding is a released one, released again.
        """
        lock, other = nodes(), nodes()
        if capabilities.ttl_honoured:
            holdings = _holdings(lock)
            first = await holdings.acquire(name, 0.3)
            assert first is not None
            await asyncio.sleep(0.3 + EXPIRY_SLACK_SECONDS)
            assert await lock.try_acquire(name, 30), "a lapsed lease must free the name"
            await holdings.release_holding(first)
            # The release found the name taken over: whoever ran under `first` may have
            # overlapped the newer holder, and the fire runner reports such a run lost.
            assert first.lost, "a release that found its lock taken over left it not lost"
        else:
            holdings = _holdings(lock)
            first_holding = await holdings.acquire(name, 30)
            assert first_holding is not None
            await holdings.release_holding(first_holding)
            assert await lock.try_acquire(name, 30)
            await holdings.release_holding(first_holding)
        assert await other.try_acquire(name, 30) is False, (
            "an older holding's release freed a newer"
        )
        await lock.release(name)
        assert await other.try_acquire(name, 30)
        await other.release(name)

    async def test_a_lapsed_holdings_renewal_never_extends_a_newer_one(
        self,
        nodes: AsyncNodes,
        name: str,
        capabilities: LockCapabilities,
    ) -> None:
        if not capabilities.renewable:
            pytest.skip("backend declares no renewal")
        lock, other = _holdings(nodes()), nodes()
        first = await lock.acquire(name, 0.3 if capabilities.ttl_honoured else 30)
        assert first is not None
        if capabilities.ttl_honoured:
            await asyncio.sleep(0.3 + EXPIRY_SLACK_SECONDS)
        else:
            await lock.release_holding(first)
        second = await lock.acquire(name, 1.0)
        assert second is not None
        assert await lock.renew_holding(first, 30) is False, "an older holding was renewed"
        assert first.lost or first.released
        assert not second.lost
        if capabilities.ttl_honoured:
            deadline = time.monotonic() + 1.0 + EXPIRY_SLACK_SECONDS
            while not await other.try_acquire(name, 30):  # the newer lease still ends at its TTL
                assert time.monotonic() < deadline, "the newer lease was extended"
                await asyncio.sleep(0.05)
            await other.release(name)
        await lock.release_holding(second)

    # -- fire claims --------------------------------------------------------------

    async def test_a_claim_blocks_every_node_and_outlives_its_claimer(
        self, nodes: AsyncNodes, name: str
    ) -> None:
        """A fire claim is never released: not by its claimer, not when it closes."""
        claimer, other = _claims(nodes()), _claims(nodes())
        # Blocking is checked on a 30 s window, so a slow machine cannot see it end
        # between two calls; the end of a window on a 1 s claim of its own.
        assert await claimer.try_claim(name, 30)
        assert await other.try_claim(name, 30) is False
        assert await claimer.try_claim(name, 30) is False, "a claim is not re-entrant"
        short = f"{name}:1s"
        assert await claimer.try_claim(short, 1.0)
        await _close(claimer)
        assert await other.try_claim(name, 30) is False, "a claim died with its claimer"
        deadline = time.monotonic() + 1.0 + EXPIRY_SLACK_SECONDS
        while not await other.try_claim(short, 30):  # it ends with its window, by the server
            assert time.monotonic() < deadline, "a claim outlived its window"
            await asyncio.sleep(0.1)

    async def test_a_claim_takes_no_lock_of_its_name(
        self, nodes: AsyncNodes, name: str, capabilities: LockCapabilities
    ) -> None:
        """Session backends keep claims out of the server's lock table (as rows)."""
        claimer = nodes()
        assert await _claims(claimer).try_claim(name, 30)
        if capabilities.session_scoped:
            assert await nodes().try_acquire(name, 30), "a claim took a session lock"
            await nodes().release(name)

    async def test_claims_taken_together_are_answered_each_in_order(
        self, nodes: AsyncNodes, name: str
    ) -> None:
        """`try_claim_many` (a resident host's batch): each answer is its own claim's.

        A claim already taken loses, a name given twice is claimed once, and every
        claim won holds on the server for its own window, as `try_claim`'s would.
        """
        claimer, other = nodes(), nodes()
        assert isinstance(claimer, AsyncBatchClaimingLock), f"{claimer!r} takes no batches"
        first, taken, short = f"{name}:first", f"{name}:taken", f"{name}:short"
        assert await _claims(other).try_claim(taken, 30)
        answers = await claimer.try_claim_many(
            [(first, 30), (taken, 30), (first, 30), (short, 1.0)]
        )
        assert answers == [True, False, False, True]
        assert await _claims(other).try_claim(first, 30) is False, "a batch claim was not taken"
        assert await _claims(other).try_claim(short, 30) is False, "a batch claim was not taken"
        assert await claimer.try_claim_many([]) == []
        deadline = time.monotonic() + 1.0 + EXPIRY_SLACK_SECONDS
        while not await _claims(other).try_claim(short, 30):  # its own window, not the first's
            assert time.monotonic() < deadline, "a batch claim outlived its window"
            await asyncio.sleep(0.1)
        assert await _claims(other).try_claim(first, 30) is False, "a claim ended too early"

    async def test_holdings_taken_together_are_answered_each_in_order(
        self, nodes: AsyncNodes, name: str, capabilities: LockCapabilities
    ) -> None:
        """`acquire_many` (a resident host's task locks): each answer is its own holding.

        A name held elsewhere is None, a name given twice is taken once, each holding
        won excludes other nodes and is released on its own, and a fenced one's token
        is ordered with the name's other acquisitions, as `acquire`'s would be.
        """
        holder, other = nodes(), nodes()
        assert isinstance(holder, AsyncBatchAcquiringLock), f"{holder!r} has no acquire_many"
        first, taken, second = f"{name}:first", f"{name}:taken", f"{name}:second"
        fenced = capabilities.fenced
        assert await other.try_acquire(taken, 30)
        one, held, again, two = await holder.acquire_many(
            [(first, 30), (taken, 30), (first, 30), (second, 30)], fenced=fenced
        )
        assert isinstance(one, Holding), one
        assert isinstance(two, Holding), two
        assert (held, again) == (None, None), "a held or repeated name was taken"
        assert (one.name, two.name) == (first, second)
        assert (one.fence is not None, two.fence is not None) == (fenced, fenced)
        assert await other.try_acquire(first, 30) is False, "a batch holding was not taken"
        assert await other.try_acquire(second, 30) is False, "a batch holding was not taken"
        await _holdings(holder).release_holding(one)
        assert await other.try_acquire(second, 30) is False, "one release freed another"
        if fenced:
            later: Any = other
            token = await later.try_acquire_fenced(first, 30)
            assert isinstance(token, int)
            assert one.fence is not None
            assert token > one.fence
        else:
            assert await other.try_acquire(first, 30), "a batch holding was not released"
        await _holdings(holder).release_holding(two)
        assert await other.try_acquire(second, 30), "a batch holding was not released"
        for released in (first, taken, second):
            await other.release(released)
        assert await holder.acquire_many([], fenced=fenced) == []

    @pytest.mark.parametrize("ttl", [0, -1, -0.5, math.nan, math.inf, -math.inf])
    async def test_bad_ttl_is_refused(self, nodes: AsyncNodes, name: str, ttl: float) -> None:
        lock = nodes()
        with pytest.raises(ValueError, match="ttl"):
            await lock.try_acquire(name, ttl)
        assert await lock.try_acquire(name, 30), "a refused call must not leave state behind"
        await lock.release(name)

    # -- names ------------------------------------------------------------------

    async def test_name_of_255_characters_is_accepted(self, nodes: AsyncNodes, name: str) -> None:
        long_name = (name + "x" * 255)[:255]
        first, second = nodes(), nodes()
        assert await first.try_acquire(long_name, 30)
        assert await second.try_acquire(long_name, 30) is False
        assert await second.try_acquire(long_name[:-1] + "y", 30), "names must not be truncated"
        await first.release(long_name)
        await second.release(long_name[:-1] + "y")

    @pytest.mark.parametrize(
        "bad_name",
        ["", "x" * 256, "nul\x00inside", "lone\ud800surrogate"],
        ids=["empty", "256-chars", "nul", "lone-surrogate"],
    )
    async def test_bad_name_is_refused(self, nodes: AsyncNodes, bad_name: str) -> None:
        with pytest.raises(ValueError):
            await nodes().try_acquire(bad_name, 30)

    async def test_non_ascii_name(self, nodes: AsyncNodes, name: str) -> None:
        unicode_name = name + ":überprüfung-日本語-🔒"
        first, second = nodes(), nodes()
        assert await first.try_acquire(unicode_name, 30)
        assert await second.try_acquire(unicode_name, 30) is False
        await first.release(unicode_name)
        assert await second.try_acquire(unicode_name, 30)
        await second.release(unicode_name)

    async def test_names_differing_only_in_case_are_two_locks(
        self, nodes: AsyncNodes, name: str
    ) -> None:
        first, second = nodes(), nodes()
        assert await first.try_acquire(name + ":Report", 30)
        assert await second.try_acquire(name + ":report", 30), "lock names must be case-sensitive"
        assert await second.try_acquire(name + ":REPORT", 30)
        await first.release(name + ":Report")
        await second.release(name + ":report")
        await second.release(name + ":REPORT")

    async def test_names_differing_only_in_trailing_space_are_two_locks(
        self, nodes: AsyncNodes, name: str
    ) -> None:
        first, second = nodes(), nodes()
        assert await first.try_acquire(name, 30)
        assert await second.try_acquire(name + " ", 30), "SQL PAD SPACE must not merge names"
        await first.release(name)
        await second.release(name + " ")

    # -- concurrency ------------------------------------------------------------

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
            context = multiprocessing.get_context("spawn")
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

    # -- fencing and renewal ------------------------------------------------------

    async def test_fencing_tokens_strictly_increase(
        self,
        nodes: AsyncNodes,
        name: str,
        capabilities: LockCapabilities,
    ) -> None:
        if not capabilities.fenced:
            pytest.skip("backend declares no fencing tokens")
        tokens: list[int] = []
        for _ in range(5):
            lock: Any = nodes()
            token = await lock.try_acquire_fenced(name, 30)
            assert isinstance(token, int)
            assert lock.fencing_token(name) == token
            assert await nodes().try_acquire(name, 30) is False
            tokens.append(token)
            await lock.release(name)
        assert tokens == sorted(set(tokens)), f"tokens went backwards or repeated: {tokens}"

    async def test_renewal_keeps_the_lease(
        self,
        nodes: AsyncNodes,
        name: str,
        capabilities: LockCapabilities,
    ) -> None:
        if not capabilities.renewable:
            pytest.skip("backend declares no renewal")
        holder: Any = nodes()
        other = nodes()
        # Renewed every 0.5 s for 2 s, past the 1.5 s lease: a renewal may take up to
        # 1 s on a loaded machine (a 1 s lease left 0.5 s and failed once in CI).
        assert await holder.try_acquire(name, 1.5)
        for _ in range(4):
            await asyncio.sleep(0.5)
            assert await holder.renew(name, 1.5) is True
        assert await other.try_acquire(name, 30) is False, "a renewed lease was taken over"
        assert holder.is_lost(name) is False
        await holder.release(name)
        assert await holder.renew(name, 1.0) is False, "renewing a released name must fail"

    # -- failure ----------------------------------------------------------------

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncDistributedLock, str]:
        pytest.skip("backend has no network address")

    async def test_unreachable_server_raises_backend_error_without_password(
        self, unreachable_lock: tuple[AsyncDistributedLock, str], name: str
    ) -> None:
        lock, password = unreachable_lock
        assert password, "the fixture must put a password in the URL"
        assert password not in repr(lock)
        started = time.monotonic()
        with pytest.raises(LockBackendError) as caught:
            await lock.try_acquire(name, 30)
        assert time.monotonic() - started < 15, "an unreachable server must fail fast"
        assert password not in str(caught.value)
        assert password not in repr(caught.value)
        if isinstance(lock, AsyncBatchAcquiringLock):  # each acquisition fails on its own
            answers = await lock.acquire_many([(f"{name}:a", 30), (f"{name}:b", 30)])
            assert [type(answer) for answer in answers] == [LockBackendError] * 2, answers
            assert all(password not in str(answer) for answer in answers)
        await lock.release(name)  # must not raise either
        await _close(lock)
