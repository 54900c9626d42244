"""The lease rules of the lock contract: TTLs, holdings, fire claims, fencing, renewal.

What a holding is worth over time: a lease ends at its TTL and a session outlives
it, as the backend declares; an older holding never frees or extends a newer one; a
fire claim is never released; batches answer each request as a single call would.
Part of `AsyncLockContract`. Written once, for asyncio; `testing/leases_contract.py`
is generated from it by `tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncLeasesContract LeasesContract
# async-to-sync: rename AsyncNodeFixtures NodeFixtures

from __future__ import annotations

import asyncio  # sync: drop
import time
from typing import Any

import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import (
    AsyncBatchAcquiringLock,
    AsyncBatchClaimingLock,
    LockCapabilities,
)
from firefly_scheduling.testing.nodes_async import (
    EXPIRY_SLACK_SECONDS,
    AsyncNodeFixtures,
    AsyncNodes,
    claims_of,
    close_lock,
    holdings_of,
)


class AsyncLeasesContract(AsyncNodeFixtures):
    """How long holdings and claims last, and that none outlives or frees another."""

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
        started = time.monotonic()
        assert await old.try_acquire(name, 1.0)
        taken = await new.try_acquire(name, 30)
        # A loaded machine can spend the lease's whole second between the two calls;
        # only a win inside that second is a live lease taken.
        assert not taken or time.monotonic() - started >= 1.0, "a live lease was taken"
        deadline = started + 1.0 + EXPIRY_SLACK_SECONDS
        while not taken:
            assert time.monotonic() < deadline, "the lease was not freed after its TTL"
            await asyncio.sleep(0.05)
            taken = await new.try_acquire(name, 30)
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
            holdings = holdings_of(lock)
            first = await holdings.acquire(name, 0.3)
            assert first is not None
            await asyncio.sleep(0.3 + EXPIRY_SLACK_SECONDS)
            assert await lock.try_acquire(name, 30), "a lapsed lease must free the name"
            await holdings.release_holding(first)
            # The release found the name taken over: whoever ran under `first` may have
            # overlapped the newer holder, and the fire runner reports such a run lost.
            assert first.lost, "a release that found its lock taken over left it not lost"
        else:
            holdings = holdings_of(lock)
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
        lock, other = holdings_of(nodes()), nodes()
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
        claimer, other = claims_of(nodes()), claims_of(nodes())
        # Blocking is checked on a 30 s window, so a slow machine cannot see it end
        # between two calls; the end of a window on a 1 s claim of its own.
        assert await claimer.try_claim(name, 30)
        assert await other.try_claim(name, 30) is False
        assert await claimer.try_claim(name, 30) is False, "a claim is not re-entrant"
        short = f"{name}:1s"
        assert await claimer.try_claim(short, 1.0)
        await close_lock(claimer)
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
        assert await claims_of(claimer).try_claim(name, 30)
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
        assert await claims_of(other).try_claim(taken, 30)
        answers = await claimer.try_claim_many(
            [(first, 30), (taken, 30), (first, 30), (short, 1.0)]
        )
        assert answers == [True, False, False, True]
        assert await claims_of(other).try_claim(first, 30) is False, "a batch claim was not taken"
        assert await claims_of(other).try_claim(short, 30) is False, "a batch claim was not taken"
        assert await claimer.try_claim_many([]) == []
        deadline = time.monotonic() + 1.0 + EXPIRY_SLACK_SECONDS
        while not await claims_of(other).try_claim(short, 30):  # its own window, not the first's
            assert time.monotonic() < deadline, "a batch claim outlived its window"
            await asyncio.sleep(0.1)
        assert await claims_of(other).try_claim(first, 30) is False, "a claim ended too early"

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
        await holdings_of(holder).release_holding(one)
        assert await other.try_acquire(second, 30) is False, "one release freed another"
        if fenced:
            later: Any = other
            token = await later.try_acquire_fenced(first, 30)
            assert isinstance(token, int)
            assert one.fence is not None
            assert token > one.fence
        else:
            assert await other.try_acquire(first, 30), "a batch holding was not released"
        await holdings_of(holder).release_holding(two)
        assert await other.try_acquire(second, 30), "a batch holding was not released"
        for released in (first, taken, second):
            await other.release(released)
        assert await holder.acquire_many([], fenced=fenced) == []

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
