"""Independent lock instances for the contract's cases, as if on separate nodes.

Every part of the lock contract (`contract_async`, `leases_contract_async`,
`concurrency_contract_async`) takes its instances from `nodes` and its names from
`name`, so a backend supplies one fixture, `lock_factory`, for all of them. Written
once, for asyncio; `testing/nodes.py` is generated from it by `tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncNodeFixtures NodeFixtures

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.port import (
    AsyncClaimingLock,
    AsyncDistributedLock,
    AsyncHoldingLock,
    LockCapabilities,
    capabilities_of,
)
from firefly_scheduling.testing.hostile_async import AsyncLockFactory

#: Longest a lease backend may take past the TTL to free a lock (memcached rounds TTLs
#: up to whole seconds, and its clock ticks once a second).
EXPIRY_SLACK_SECONDS = 2.5


def holdings_of(lock: AsyncDistributedLock) -> AsyncHoldingLock:
    """`lock` as a lock that hands out holdings; the case fails where it does not."""
    assert isinstance(lock, AsyncHoldingLock), f"{lock!r} hands out no holdings"
    return lock


def claims_of(lock: AsyncDistributedLock) -> AsyncClaimingLock:
    """`lock` as a lock that takes fire claims; the case fails where it does not."""
    assert isinstance(lock, AsyncClaimingLock), f"{lock!r} takes no fire claims"
    return lock


async def close_lock(lock: object) -> None:
    """Close `lock` if it has anything to close (an in-memory lock has not)."""
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
            await close_lock(lock)


class AsyncNodeFixtures:
    """The fixtures every part of the contract shares; a backend adds `lock_factory`."""

    pytestmark = pytest.mark.firefly_asyncio  # sync: drop

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
