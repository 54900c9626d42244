"""The asyncio port: `AsyncDistributedLock` and the capabilities an async backend may add.

The same rules as the synchronous port (`firefly_scheduling.locks.port`), awaited:
`try_acquire` never waits for a holder, release is owner-checked, names and TTLs
are validated alike, and a backend failure raises `LockBackendError`. Capabilities
are declared the same way (`capabilities`, a `LockCapabilities`) and read through
the same `capabilities_of`. An async adapter and the sync adapter of one backend
exclude each other on the same name: they share its keys, statements and scripts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from firefly_scheduling.locks.port import LockCapabilities, capabilities_of

if TYPE_CHECKING:
    from firefly_scheduling.errors import LockBackendError
    from firefly_scheduling.locks.holding import Holding

__all__ = [
    "AsyncBatchAcquiringLock",
    "AsyncBatchClaimingLock",
    "AsyncClaimingLock",
    "AsyncDistributedLock",
    "AsyncFencedLock",
    "AsyncHoldingLock",
    "AsyncRenewableLock",
    "LockCapabilities",
    "capabilities_of",
]


@runtime_checkable
class AsyncDistributedLock(Protocol):
    """A named, non-blocking, owner-checked lock, for asyncio code."""

    async def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        """Take the lock `name` for at most `ttl_seconds`, or return False at once."""
        ...

    async def release(self, name: str) -> None:
        """Give back `name` if, and only if, this instance holds it."""
        ...

    async def aclose(self) -> None:
        """Release what this instance holds and drop its connections."""
        ...


@runtime_checkable
class AsyncFencedLock(Protocol):
    """An async lock whose acquisitions carry a fencing token."""

    async def try_acquire_fenced(self, name: str, ttl_seconds: float) -> int | None: ...


@runtime_checkable
class AsyncRenewableLock(Protocol):
    """An async lock whose held lease can be extended."""

    async def renew(self, name: str, ttl_seconds: float) -> bool: ...


@runtime_checkable
class AsyncHoldingLock(Protocol):
    """An async lock that hands out one `Holding` per acquisition and acts on it alone."""

    async def acquire(
        self, name: str, ttl_seconds: float, *, fenced: bool = False
    ) -> Holding | None: ...

    async def release_holding(self, holding: Holding) -> None: ...

    async def renew_holding(self, holding: Holding, ttl_seconds: float) -> bool: ...


@runtime_checkable
class AsyncClaimingLock(Protocol):
    """An async lock that can take a fire claim: held for a window, never released."""

    async def try_claim(self, name: str, seconds: float) -> bool: ...


@runtime_checkable
class AsyncBatchClaimingLock(Protocol):
    """An async lock that takes several fire claims in one round trip (optional)."""

    async def try_claim_many(
        self, claims: Sequence[tuple[str, float]]
    ) -> list[bool | LockBackendError]: ...


@runtime_checkable
class AsyncBatchAcquiringLock(Protocol):
    """An async lock that takes the holdings of several names at once (optional)."""

    async def acquire_many(
        self, requests: Sequence[tuple[str, float]], *, fenced: bool = False
    ) -> list[Holding | LockBackendError | None]: ...
