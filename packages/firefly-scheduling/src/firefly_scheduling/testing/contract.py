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

The rules are kept in parts, each a class of its own that this one extends: the
lease rules (`leases_contract_async`), concurrency (`concurrency_contract_async`),
waiting (`waiting_contract_async`), keep-alive and leadership
(`leadership_contract_async`) and hostile names (`hostile_async`); the fixtures they
share are in `nodes_async`. Here stay the exclusion, name and unreachable-server cases.

Async cases run on a fresh event loop each (`pytest_pyfunc_call` in
`firefly_scheduling.testing`), with no pytest plugin needed; every instance a case
makes is closed on that loop when it ends.
"""

from __future__ import annotations

import math
import time

import pytest

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.hold import hold
from firefly_scheduling.locks.port import BatchAcquiringLock, DistributedLock
from firefly_scheduling.testing.concurrency_contract import ConcurrencyContract
from firefly_scheduling.testing.hostile import HostileNamesContract
from firefly_scheduling.testing.leadership_contract import LeadershipContract
from firefly_scheduling.testing.leases_contract import LeasesContract
from firefly_scheduling.testing.nodes import Nodes, close_lock
from firefly_scheduling.testing.waiting_contract import WaitingContract


class LockContract(
    LeasesContract,
    ConcurrencyContract,
    WaitingContract,
    LeadershipContract,
    HostileNamesContract,
):
    """Every rule of the port, proven against a real backend.

    Subclasses provide `lock_factory`. Servers with a network address also provide
    `unreachable_lock`, a fixture returning `(lock, password)` for a lock whose URL
    carries `password` and points at a closed local port, and `server_reader`, a
    second client of the server that the hostile-name cases read it with
    (`HostileNamesContract`).
    """

    # `nodes`, `capabilities` and `name` come from `AsyncNodeFixtures` (nodes_async).

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
        close_lock(lock)
