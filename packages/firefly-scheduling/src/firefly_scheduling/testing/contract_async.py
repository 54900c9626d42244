"""The lock contract (the port's rules), written once for both flavours.

Written once, for asyncio, in `testing/contract_async.py`; the synchronous contract in
`testing/contract.py` is generated from it by `tools/async_to_sync.py`. A backend
proves its lock by subclassing the contract of its flavour and supplying
`lock_factory`, a picklable callable returning a new, independent instance, as if
on a separate node. The async contract also needs `sync_lock_factory`, the same
backend's synchronous lock, for the case proving the two flavours exclude each
other. Capabilities are read through `capabilities_of`, so each case runs only where
it applies.

The rules are kept in parts, each a class of its own that this one extends: the
lease rules (`leases_contract_async`), concurrency (`concurrency_contract_async`),
waiting (`waiting_contract_async`), keep-alive and leadership
(`leadership_contract_async`) and hostile names (`hostile_async`); the fixtures they
share are in `nodes_async`. Here stay the exclusion, name and unreachable-server cases.

Async cases run on a fresh event loop each (`pytest_pyfunc_call` in
`firefly_scheduling.testing`), with no pytest plugin needed; every instance a case
makes is closed on that loop when it ends.
"""

# async-to-sync: rename AsyncWaitingContract WaitingContract
# async-to-sync: rename AsyncLeadershipContract LeadershipContract
# async-to-sync: rename AsyncLeasesContract LeasesContract
# async-to-sync: rename AsyncConcurrencyContract ConcurrencyContract

from __future__ import annotations

import math
import time

import pytest

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.hold_async import ahold
from firefly_scheduling.locks.port import AsyncBatchAcquiringLock, AsyncDistributedLock
from firefly_scheduling.testing.concurrency_contract_async import AsyncConcurrencyContract
from firefly_scheduling.testing.hostile_async import AsyncHostileNamesContract
from firefly_scheduling.testing.leadership_contract_async import AsyncLeadershipContract
from firefly_scheduling.testing.leases_contract_async import AsyncLeasesContract
from firefly_scheduling.testing.nodes_async import AsyncNodes, close_lock
from firefly_scheduling.testing.waiting_contract_async import AsyncWaitingContract


class AsyncLockContract(
    AsyncLeasesContract,
    AsyncConcurrencyContract,
    AsyncWaitingContract,
    AsyncLeadershipContract,
    AsyncHostileNamesContract,
):
    """Every rule of the port, proven against a real backend.

    Subclasses provide `lock_factory`. Servers with a network address also provide
    `unreachable_lock`, a fixture returning `(lock, password)` for a lock whose URL
    carries `password` and points at a closed local port, and `server_reader`, a
    second client of the server that the hostile-name cases read it with
    (`AsyncHostileNamesContract`).
    """

    pytestmark = pytest.mark.firefly_asyncio  # sync: drop

    # `nodes`, `capabilities` and `name` come from `AsyncNodeFixtures` (nodes_async).

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
        await close_lock(lock)
