# Generated from nodes_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""Independent lock instances for the contract's cases, as if on separate nodes.

Every part of the lock contract (`contract_async`, `leases_contract_async`,
`concurrency_contract_async`) takes its instances from `nodes` and its names from
`name`, so a backend supplies one fixture, `lock_factory`, for all of them. Written
once, for asyncio; `testing/nodes.py` is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from firefly_scheduling.locks.port import (
    ClaimingLock,
    DistributedLock,
    HoldingLock,
    LockCapabilities,
    capabilities_of,
)
from firefly_scheduling.testing.hostile import LockFactory

#: Longest a lease backend may take past the TTL to free a lock (memcached rounds TTLs
#: up to whole seconds, and its clock ticks once a second).
EXPIRY_SLACK_SECONDS = 2.5


def holdings_of(lock: DistributedLock) -> HoldingLock:
    """`lock` as a lock that hands out holdings; the case fails where it does not."""
    assert isinstance(lock, HoldingLock), f"{lock!r} hands out no holdings"
    return lock


def claims_of(lock: DistributedLock) -> ClaimingLock:
    """`lock` as a lock that takes fire claims; the case fails where it does not."""
    assert isinstance(lock, ClaimingLock), f"{lock!r} takes no fire claims"
    return lock


def close_lock(lock: object) -> None:
    """Close `lock` if it has anything to close (an in-memory lock has not)."""
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
            close_lock(lock)


class NodeFixtures:
    """The fixtures every part of the contract shares; a backend adds `lock_factory`."""

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
