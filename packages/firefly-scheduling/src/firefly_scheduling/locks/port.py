"""The port every lock backend implements, and the capabilities a backend may declare.

`DistributedLock` is the whole contract a backend must meet. The other protocols are
capabilities a backend MAY add; a backend says which ones it has in one place, its
`capabilities` (a `LockCapabilities`), and everything in the library reads them one
way, through `capabilities_of(lock)`, never by probing methods or classes:

* `FencedLock` (`capabilities.fenced`): each acquisition can return a fencing token.
* `RenewableLock` (`capabilities.renewable`): a held lease can be extended.
* `HoldingLock`: each acquisition is its own `Holding`, released and renewed through
  that handle, so a lapsed holding's late release or renewal never touches a newer
  holding of the same name (`BaseLock` provides it; `holdings.holding_lock` adapts a
  lock that only has the port).
* `ClaimingLock`: a fire claim, a hold that is never given back and outlives the
  process (`fires.claims`).
* `BatchAcquiringLock` (`capabilities.batch_acquires`): several holdings taken in
  one request.

The asyncio flavour (`AsyncDistributedLock` and its capabilities) lives here too: the
same rules, awaited, declared the same way and read through the same `capabilities_of`.
An async adapter and the sync adapter of one backend exclude each other on the same
name: they share its keys, statements and scripts.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from firefly_scheduling.errors import LockBackendError
    from firefly_scheduling.locks.holding import Holding


@runtime_checkable
class DistributedLock(Protocol):
    """A named, non-blocking, owner-checked lock shared by the nodes of a fleet.

    The rules every implementation follows (the contract suite in
    `firefly_scheduling.testing` proves them on the real server):

    * `try_acquire` never blocks: it wins at once or returns False, at the cost of
      one bounded round trip.
    * It is not re-entrant: while an instance holds a name, its own second
      `try_acquire` of that name returns False.
    * `release` is owner-checked: releasing a name this instance does not hold does
      nothing, and a late release never frees a newer holder's lock.
    * `ttl_seconds` must be finite and > 0 (`ValueError` otherwise). Lease backends
      free the lock after it; session backends hold it for the life of their
      connection.
    * Names are non-empty, at most 255 characters, contain no NUL, and are exact and
      case-sensitive.
    * A backend failure raises `LockBackendError` from `try_acquire`; `release`
      logs it and returns.
    """

    def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        """Take the lock `name` for at most `ttl_seconds`, or return False at once."""
        ...

    def release(self, name: str) -> None:
        """Give back `name` if, and only if, this instance holds it."""
        ...


@dataclass(frozen=True)
class LockCapabilities:
    """What a backend promises beyond the port; the contract suite checks each claim.

    * `ttl_honoured`: the server frees the lock when the TTL passes (lease backends).
    * `session_scoped`: the lock lives as long as the backend's connection (PostgreSQL,
      MySQL); the TTL is accepted and ignored.
    * `cross_process`: the lock excludes other OS processes (False only in memory).
    * `fenced`: the lock is a `FencedLock`.
    * `renewable`: the lock is a `RenewableLock` (on a session backend, renewing
      checks that the session still holds the lock).
    * `batch_acquires`: the lock is a `BatchAcquiringLock` that sends the
      acquisitions of one `acquire_many` as one request.
    * `notified_wait`: a waiting acquisition sleeps between attempts until the server
      notifies it that the name was freed (a Redis message, an etcd watch), and
      polls only as a fallback.
    * `ordered_waiters`: waiting acquisitions of every process are served in the
      order they arrived, in a queue the server keeps.
    """

    ttl_honoured: bool = True
    session_scoped: bool = False
    cross_process: bool = True
    fenced: bool = False
    renewable: bool = False
    batch_acquires: bool = False
    notified_wait: bool = False
    ordered_waiters: bool = False


#: What a lock that declares nothing is taken to be: a lease lock with the port only.
#: Its fire claims are plain acquisitions, never released, freed by their TTL.
PORT_ONLY = LockCapabilities()


@runtime_checkable
class DeclaresCapabilities(Protocol):
    """A lock that states its capabilities (every `BaseLock` does)."""

    @property
    def capabilities(self) -> LockCapabilities: ...


def capabilities_of(lock: object) -> LockCapabilities:
    """The capabilities `lock` declares; `PORT_ONLY` when it declares none."""
    if isinstance(lock, DeclaresCapabilities):
        declared = lock.capabilities
        if isinstance(declared, LockCapabilities):
            return declared
    return PORT_ONLY


def check_flavour(lock: object, *, asynchronous: bool) -> None:
    """Refuse a lock of the other flavour: an asyncio lock where a sync one is needed, or
    the reverse. Protocols are checked by method names, which both flavours share, so
    without this an async lock would fail later with a puzzling "never awaited"."""
    try_acquire = getattr(lock, "try_acquire", None)
    if try_acquire is None or inspect.iscoroutinefunction(try_acquire) == asynchronous:
        return
    flavours = ("an asyncio", "a synchronous")
    wanted, got = flavours if asynchronous else flavours[::-1]
    raise TypeError(
        f"{wanted} lock is needed here, got {got} one: {type(lock).__module__}."
        f"{type(lock).__qualname__}"
    )


@runtime_checkable
class FencedLock(Protocol):
    """A lock whose acquisitions carry a fencing token."""

    def try_acquire_fenced(self, name: str, ttl_seconds: float) -> int | None:
        """Like `try_acquire`, returning the new holding's token (or None when lost).

        The token is strictly greater than every earlier token of `name` on this
        backend, so a guarded resource can refuse writes stamped with an older one.
        """
        ...


@runtime_checkable
class RenewableLock(Protocol):
    """A lock whose held lease can be extended."""

    def renew(self, name: str, ttl_seconds: float) -> bool:
        """Extend the held `name` to `ttl_seconds` from now; False when it is gone."""
        ...


@runtime_checkable
class HoldingLock(Protocol):
    """A lock that hands out one `Holding` per acquisition and acts on it alone."""

    def acquire(
        self, name: str, ttl_seconds: float, *, wait: float = 0.0, fenced: bool = False
    ) -> Holding | None:
        """Take `name` and return the new holding, or None when it stayed taken.

        `wait` is how many seconds to wait for it: 0 tries once, `math.inf` for ever.
        """
        ...

    def release_holding(self, holding: Holding) -> None:
        """Give back `holding` if it is still held; never another holding of its name."""
        ...

    def renew_holding(self, holding: Holding, ttl_seconds: float) -> bool:
        """Extend `holding`; False when it was not extended (then see `holding.lost`)."""
        ...


@runtime_checkable
class ClaimingLock(Protocol):
    """A lock that can take a fire claim: held for a window, never released."""

    def try_claim(self, name: str, seconds: float) -> bool:
        """Take `name` for `seconds` on the server's terms, or return False at once.

        The claim is never released and never tracked locally: it outlives this
        process and ends when its window has passed, by the server's clock where the
        backend has one.
        """
        ...


@runtime_checkable
class BatchClaimingLock(Protocol):
    """A lock that takes several fire claims in one round trip (optional).

    A resident host claims the fires due at one instant together
    (`hosts.apscheduler.claim_first`); a backend that can send them as one request (a Redis
    pipeline, one SQL statement) implements this, the others are asked one claim at
    a time.
    """

    def try_claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | LockBackendError]:
        """`try_claim` of each `(name, seconds)`, answered in order, each on its own.

        An answer is won (True), lost (False), or the error that left that claim's
        outcome unknown, never read as lost; one claim's error fails no other.
        """
        ...


@runtime_checkable
class BatchAcquiringLock(Protocol):
    """A lock that takes the holdings of several names at once (`BaseLock` has it).

    With `capabilities.batch_acquires`, the acquisitions go to the server as one
    request (a Redis pipeline), and the resident host takes the task locks of the
    fires it won together with their claims (`FireRunner.claim_fires`).
    """

    def acquire_many(
        self, requests: Sequence[tuple[str, float]], *, fenced: bool = False
    ) -> list[Holding | LockBackendError | None]:
        """`acquire` of each `(name, ttl_seconds)`, answered in order, each on its own:
        the new `Holding`, None when taken, or the error that left it unknown."""
        ...


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
        self, name: str, ttl_seconds: float, *, wait: float = 0.0, fenced: bool = False
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
