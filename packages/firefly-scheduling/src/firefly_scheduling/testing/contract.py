# Generated from contract_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
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

from __future__ import annotations

import math
import multiprocessing
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.hold import hold
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import (
    BatchAcquiringLock,
    BatchClaimingLock,
    ClaimingLock,
    DistributedLock,
    HoldingLock,
    LockCapabilities,
    capabilities_of,
)
from firefly_scheduling.testing.hostile import (
    HostileNamesContract,
    LockFactory,
)
from firefly_scheduling.testing.waiting_contract import WaitingContract
from firefly_scheduling.testing.workers import default_stop_signals, exclusive_file_worker

#: Longest a lease backend may take past the TTL to free a lock (memcached rounds TTLs
#: up to whole seconds, and its clock ticks once a second).
EXPIRY_SLACK_SECONDS = 2.5


def _holdings(lock: DistributedLock) -> HoldingLock:
    assert isinstance(lock, HoldingLock), f"{lock!r} hands out no holdings"
    return lock


def _claims(lock: DistributedLock) -> ClaimingLock:
    assert isinstance(lock, ClaimingLock), f"{lock!r} takes no fire claims"
    return lock


def _close(lock: object) -> None:
    close = getattr(lock, "close", None)
    if callable(close):
        close()


class Nodes:
    """Makes independent instances (`nodes()`); `close_all()` closes every one made."""

    def __init__(self, factory: LockFactory) -> None:
        self._factory = factory
        self._made: list[DistributedLock] = []

    def __call__(self) -> DistributedLock:
        self._made.append(self._factory())
        return self._made[-1]

    def close_all(self) -> None:
        for lock in self._made:
            _close(lock)


class LockContract(WaitingContract, HostileNamesContract):
    """Every rule of the port, proven against a real backend.

    Subclasses provide `lock_factory`. Servers with a network address also provide
    `unreachable_lock`, a fixture returning `(lock, password)` for a lock whose URL
    carries `password` and points at a closed local port, and `server_reader`, a
    second client of the server that the hostile-name cases read it with
    (`HostileNamesContract`).
    """

    # -- fixtures ---------------------------------------------------------------

    # `lock_factory` (and, asyncio, `sync_lock_factory`) are declared by the hostile-name
    # cases' class, which this one extends.

    @pytest.fixture
    def nodes(self, lock_factory: LockFactory) -> Iterator[Nodes]:
        """Independent instances, all closed after the case."""
        made = Nodes(lock_factory)
        yield made
        made.close_all()

    @pytest.fixture
    def capabilities(self, lock_factory: LockFactory) -> LockCapabilities:
        """What the backend declares (`capabilities_of`); every case checks the claim."""
        return capabilities_of(lock_factory())

    @pytest.fixture
    def name(self, request: pytest.FixtureRequest) -> str:
        """A name no other test (or earlier run against the same server) has used."""
        return f"contract:{request.node.name[:60]}:{uuid.uuid4().hex}"

    # -- exclusion --------------------------------------------------------------

    def test_acquire(self, nodes: Nodes, name: str) -> None:
        lock = nodes()
        assert lock.try_acquire(name, 30) is True
        lock.release(name)

    def test_second_instance_is_refused(self, nodes: Nodes, name: str) -> None:
        first, second = nodes(), nodes()
        assert first.try_acquire(name, 30)
        assert second.try_acquire(name, 30) is False
        first.release(name)

    def test_same_instance_is_refused(self, nodes: Nodes, name: str) -> None:
        lock = nodes()
        assert lock.try_acquire(name, 30)
        assert lock.try_acquire(name, 30) is False, "a lock must not be re-entrant"
        lock.release(name)
        assert nodes().try_acquire(name, 30), "one release must free a once-acquired lock"

    def test_independent_names(self, nodes: Nodes, name: str) -> None:
        first, second = nodes(), nodes()
        assert first.try_acquire(name + ":a", 30)
        assert second.try_acquire(name + ":b", 30)
        assert first.try_acquire(name + ":b", 30) is False
        first.release(name + ":a")
        second.release(name + ":b")

    def test_release_then_reacquire(self, nodes: Nodes, name: str) -> None:
        first, second = nodes(), nodes()
        assert first.try_acquire(name, 30)
        first.release(name)
        assert second.try_acquire(name, 30)
        assert first.try_acquire(name, 30) is False
        second.release(name)
        assert first.try_acquire(name, 30)
        first.release(name)

    def test_release_of_a_name_not_held_is_a_noop(self, nodes: Nodes, name: str) -> None:
        holder, stranger = nodes(), nodes()
        stranger.release(name)  # held by nobody
        assert holder.try_acquire(name, 30)
        stranger.release(name)  # held by someone else
        assert nodes().try_acquire(name, 30) is False, "a stranger's release freed the lock"
        holder.release(name)

    def test_hold_releases_on_exit(self, nodes: Nodes, name: str) -> None:
        first, second = nodes(), nodes()
        with hold(first, name, 30) as acquired:
            assert acquired
            with hold(second, name, 30) as contended:
                assert not contended
        with hold(second, name, 30) as acquired_after:
            assert acquired_after

    # -- TTL --------------------------------------------------------------------

    def test_ttl_is_honoured_as_the_backend_declares(
        self,
        nodes: Nodes,
        name: str,
        capabilities: LockCapabilities,
    ) -> None:
        """A lease backend frees the lock at the TTL; a session backend keeps it past it.

        Every backend declares one of the two; a late release of an expired lease must
        never free the lease's new holder.
        """
        if capabilities.ttl_honoured:
            self._check_lease_expiry(nodes, name)
        elif capabilities.session_scoped:
            self._check_session_survives_ttl(nodes, name)
        else:
            pytest.fail("a backend must declare ttl_honoured or session_scoped")

    @staticmethod
    def _check_lease_expiry(nodes: Nodes, name: str) -> None:
        old, new, third = nodes(), nodes(), nodes()
        assert old.try_acquire(name, 1.0)
        assert new.try_acquire(name, 30) is False
        deadline = time.monotonic() + 1.0 + EXPIRY_SLACK_SECONDS
        while not new.try_acquire(name, 30):
            assert time.monotonic() < deadline, "the lease was not freed after its TTL"
            time.sleep(0.05)
        old.release(name)  # the late release of the expired holder
        assert third.try_acquire(name, 30) is False, "a late release freed the new holder"
        new.release(name)
        assert third.try_acquire(name, 30)
        third.release(name)

    @staticmethod
    def _check_session_survives_ttl(nodes: Nodes, name: str) -> None:
        holder, other = nodes(), nodes()
        assert holder.try_acquire(name, 0.2)
        time.sleep(0.6)
        assert other.try_acquire(name, 30) is False, "a session lock expired at its TTL"
        holder.release(name)
        assert other.try_acquire(name, 30)
        other.release(name)

    # -- holdings ---------------------------------------------------------------

    def test_a_late_release_of_an_older_holding_keeps_the_newer_one(
        self,
        nodes: Nodes,
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
            first = holdings.acquire(name, 0.3)
            assert first is not None
            time.sleep(0.3 + EXPIRY_SLACK_SECONDS)
            assert lock.try_acquire(name, 30), "a lapsed lease must free the name"
            holdings.release_holding(first)
            # The release found the name taken over: whoever ran under `first` may have
            # overlapped the newer holder, and the fire runner reports such a run lost.
            assert first.lost, "a release that found its lock taken over left it not lost"
        else:
            holdings = _holdings(lock)
            first_holding = holdings.acquire(name, 30)
            assert first_holding is not None
            holdings.release_holding(first_holding)
            assert lock.try_acquire(name, 30)
            holdings.release_holding(first_holding)
        assert other.try_acquire(name, 30) is False, "an older holding's release freed a newer"
        lock.release(name)
        assert other.try_acquire(name, 30)
        other.release(name)

    def test_a_lapsed_holdings_renewal_never_extends_a_newer_one(
        self,
        nodes: Nodes,
        name: str,
        capabilities: LockCapabilities,
    ) -> None:
        if not capabilities.renewable:
            pytest.skip("backend declares no renewal")
        lock, other = _holdings(nodes()), nodes()
        first = lock.acquire(name, 0.3 if capabilities.ttl_honoured else 30)
        assert first is not None
        if capabilities.ttl_honoured:
            time.sleep(0.3 + EXPIRY_SLACK_SECONDS)
        else:
            lock.release_holding(first)
        second = lock.acquire(name, 1.0)
        assert second is not None
        assert lock.renew_holding(first, 30) is False, "an older holding was renewed"
        assert first.lost or first.released
        assert not second.lost
        if capabilities.ttl_honoured:
            deadline = time.monotonic() + 1.0 + EXPIRY_SLACK_SECONDS
            while not other.try_acquire(name, 30):  # the newer lease still ends at its TTL
                assert time.monotonic() < deadline, "the newer lease was extended"
                time.sleep(0.05)
            other.release(name)
        lock.release_holding(second)

    # -- fire claims --------------------------------------------------------------

    def test_a_claim_blocks_every_node_and_outlives_its_claimer(
        self, nodes: Nodes, name: str
    ) -> None:
        """A fire claim is never released: not by its claimer, not when it closes."""
        claimer, other = _claims(nodes()), _claims(nodes())
        # Blocking is checked on a 30 s window, so a slow machine cannot see it end
        # between two calls; the end of a window on a 1 s claim of its own.
        assert claimer.try_claim(name, 30)
        assert other.try_claim(name, 30) is False
        assert claimer.try_claim(name, 30) is False, "a claim is not re-entrant"
        short = f"{name}:1s"
        assert claimer.try_claim(short, 1.0)
        _close(claimer)
        assert other.try_claim(name, 30) is False, "a claim died with its claimer"
        deadline = time.monotonic() + 1.0 + EXPIRY_SLACK_SECONDS
        while not other.try_claim(short, 30):  # it ends with its window, by the server
            assert time.monotonic() < deadline, "a claim outlived its window"
            time.sleep(0.1)

    def test_a_claim_takes_no_lock_of_its_name(
        self, nodes: Nodes, name: str, capabilities: LockCapabilities
    ) -> None:
        """Session backends keep claims out of the server's lock table (as rows)."""
        claimer = nodes()
        assert _claims(claimer).try_claim(name, 30)
        if capabilities.session_scoped:
            assert nodes().try_acquire(name, 30), "a claim took a session lock"
            nodes().release(name)

    def test_claims_taken_together_are_answered_each_in_order(
        self, nodes: Nodes, name: str
    ) -> None:
        """`try_claim_many` (a resident host's batch): each answer is its own claim's.

        A claim already taken loses, a name given twice is claimed once, and every
        claim won holds on the server for its own window, as `try_claim`'s would.
        """
        claimer, other = nodes(), nodes()
        assert isinstance(claimer, BatchClaimingLock), f"{claimer!r} takes no batches"
        first, taken, short = f"{name}:first", f"{name}:taken", f"{name}:short"
        assert _claims(other).try_claim(taken, 30)
        answers = claimer.try_claim_many([(first, 30), (taken, 30), (first, 30), (short, 1.0)])
        assert answers == [True, False, False, True]
        assert _claims(other).try_claim(first, 30) is False, "a batch claim was not taken"
        assert _claims(other).try_claim(short, 30) is False, "a batch claim was not taken"
        assert claimer.try_claim_many([]) == []
        deadline = time.monotonic() + 1.0 + EXPIRY_SLACK_SECONDS
        while not _claims(other).try_claim(short, 30):  # its own window, not the first's
            assert time.monotonic() < deadline, "a batch claim outlived its window"
            time.sleep(0.1)
        assert _claims(other).try_claim(first, 30) is False, "a claim ended too early"

    def test_holdings_taken_together_are_answered_each_in_order(
        self, nodes: Nodes, name: str, capabilities: LockCapabilities
    ) -> None:
        """`acquire_many` (a resident host's task locks): each answer is its own holding.

        A name held elsewhere is None, a name given twice is taken once, each holding
        won excludes other nodes and is released on its own, and a fenced one's token
        is ordered with the name's other acquisitions, as `acquire`'s would be.
        """
        holder, other = nodes(), nodes()
        assert isinstance(holder, BatchAcquiringLock), f"{holder!r} has no acquire_many"
        first, taken, second = f"{name}:first", f"{name}:taken", f"{name}:second"
        fenced = capabilities.fenced
        assert other.try_acquire(taken, 30)
        one, held, again, two = holder.acquire_many(
            [(first, 30), (taken, 30), (first, 30), (second, 30)], fenced=fenced
        )
        assert isinstance(one, Holding), one
        assert isinstance(two, Holding), two
        assert (held, again) == (None, None), "a held or repeated name was taken"
        assert (one.name, two.name) == (first, second)
        assert (one.fence is not None, two.fence is not None) == (fenced, fenced)
        assert other.try_acquire(first, 30) is False, "a batch holding was not taken"
        assert other.try_acquire(second, 30) is False, "a batch holding was not taken"
        _holdings(holder).release_holding(one)
        assert other.try_acquire(second, 30) is False, "one release freed another"
        if fenced:
            later: Any = other
            token = later.try_acquire_fenced(first, 30)
            assert isinstance(token, int)
            assert one.fence is not None
            assert token > one.fence
        else:
            assert other.try_acquire(first, 30), "a batch holding was not released"
        _holdings(holder).release_holding(two)
        assert other.try_acquire(second, 30), "a batch holding was not released"
        for released in (first, taken, second):
            other.release(released)
        assert holder.acquire_many([], fenced=fenced) == []

    @pytest.mark.parametrize("ttl", [0, -1, -0.5, math.nan, math.inf, -math.inf])
    def test_bad_ttl_is_refused(self, nodes: Nodes, name: str, ttl: float) -> None:
        lock = nodes()
        with pytest.raises(ValueError, match="ttl"):
            lock.try_acquire(name, ttl)
        assert lock.try_acquire(name, 30), "a refused call must not leave state behind"
        lock.release(name)

    # -- names ------------------------------------------------------------------

    def test_name_of_255_characters_is_accepted(self, nodes: Nodes, name: str) -> None:
        long_name = (name + "x" * 255)[:255]
        first, second = nodes(), nodes()
        assert first.try_acquire(long_name, 30)
        assert second.try_acquire(long_name, 30) is False
        assert second.try_acquire(long_name[:-1] + "y", 30), "names must not be truncated"
        first.release(long_name)
        second.release(long_name[:-1] + "y")

    @pytest.mark.parametrize(
        "bad_name",
        ["", "x" * 256, "nul\x00inside", "lone\ud800surrogate"],
        ids=["empty", "256-chars", "nul", "lone-surrogate"],
    )
    def test_bad_name_is_refused(self, nodes: Nodes, bad_name: str) -> None:
        with pytest.raises(ValueError):
            nodes().try_acquire(bad_name, 30)

    def test_non_ascii_name(self, nodes: Nodes, name: str) -> None:
        unicode_name = name + ":überprüfung-日本語-🔒"
        first, second = nodes(), nodes()
        assert first.try_acquire(unicode_name, 30)
        assert second.try_acquire(unicode_name, 30) is False
        first.release(unicode_name)
        assert second.try_acquire(unicode_name, 30)
        second.release(unicode_name)

    def test_names_differing_only_in_case_are_two_locks(self, nodes: Nodes, name: str) -> None:
        first, second = nodes(), nodes()
        assert first.try_acquire(name + ":Report", 30)
        assert second.try_acquire(name + ":report", 30), "lock names must be case-sensitive"
        assert second.try_acquire(name + ":REPORT", 30)
        first.release(name + ":Report")
        second.release(name + ":report")
        second.release(name + ":REPORT")

    def test_names_differing_only_in_trailing_space_are_two_locks(
        self, nodes: Nodes, name: str
    ) -> None:
        first, second = nodes(), nodes()
        assert first.try_acquire(name, 30)
        assert second.try_acquire(name + " ", 30), "SQL PAD SPACE must not merge names"
        first.release(name)
        second.release(name + " ")

    # -- concurrency ------------------------------------------------------------

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

    def test_fencing_tokens_strictly_increase(
        self,
        nodes: Nodes,
        name: str,
        capabilities: LockCapabilities,
    ) -> None:
        if not capabilities.fenced:
            pytest.skip("backend declares no fencing tokens")
        tokens: list[int] = []
        for _ in range(5):
            lock: Any = nodes()
            token = lock.try_acquire_fenced(name, 30)
            assert isinstance(token, int)
            assert lock.fencing_token(name) == token
            assert nodes().try_acquire(name, 30) is False
            tokens.append(token)
            lock.release(name)
        assert tokens == sorted(set(tokens)), f"tokens went backwards or repeated: {tokens}"

    def test_renewal_keeps_the_lease(
        self,
        nodes: Nodes,
        name: str,
        capabilities: LockCapabilities,
    ) -> None:
        if not capabilities.renewable:
            pytest.skip("backend declares no renewal")
        holder: Any = nodes()
        other = nodes()
        # Renewed every 0.5 s for 2 s, past the 1.5 s lease: a renewal may take up to
        # 1 s on a loaded machine (a 1 s lease left 0.5 s and failed once in CI).
        assert holder.try_acquire(name, 1.5)
        for _ in range(4):
            time.sleep(0.5)
            assert holder.renew(name, 1.5) is True
        assert other.try_acquire(name, 30) is False, "a renewed lease was taken over"
        assert holder.is_lost(name) is False
        holder.release(name)
        assert holder.renew(name, 1.0) is False, "renewing a released name must fail"

    # -- failure ----------------------------------------------------------------

    @pytest.fixture
    def unreachable_lock(self) -> tuple[DistributedLock, str]:
        pytest.skip("backend has no network address")

    def test_unreachable_server_raises_backend_error_without_password(
        self, unreachable_lock: tuple[DistributedLock, str], name: str
    ) -> None:
        lock, password = unreachable_lock
        assert password, "the fixture must put a password in the URL"
        assert password not in repr(lock)
        started = time.monotonic()
        with pytest.raises(LockBackendError) as caught:
            lock.try_acquire(name, 30)
        assert time.monotonic() - started < 15, "an unreachable server must fail fast"
        assert password not in str(caught.value)
        assert password not in repr(caught.value)
        if isinstance(lock, BatchAcquiringLock):  # each acquisition fails on its own
            answers = lock.acquire_many([(f"{name}:a", 30), (f"{name}:b", 30)])
            assert [type(answer) for answer in answers] == [LockBackendError] * 2, answers
            assert all(password not in str(answer) for answer in answers)
        lock.release(name)  # must not raise either
        _close(lock)
