"""`BaseLock`: the behaviour every backend shares, written once.

A backend subclasses it and implements only its round trips (`_acquire`,
`_release`, and optionally `_renew` and `_fence`). Everything a user relies on
regardless of the server lives here: name and TTL validation, the
not-re-entrant bookkeeping, a fresh owner token per acquisition, driver-error
translation with credentials scrubbed, and release that never raises.

Capabilities are class attributes, read by the contract suite and the scheduler
rather than discovered with `isinstance`:

* `ttl_honoured`: the server frees the lock when the TTL passes (lease backends).
* `session_scoped`: the lock lives as long as the backend's connection (PostgreSQL,
  MySQL); the TTL is accepted and ignored.
* `cross_process`: the lock excludes other OS processes (False only in memory).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.locks.hold import hold
from firefly_scheduling.locks.redaction import scrub
from firefly_scheduling.locks.validation import validate_lock_name, validate_ttl

logger = logging.getLogger("firefly_scheduling.locks")


def new_owner_token() -> str:
    """A fresh, unguessable token identifying one acquisition (never `uuid1`)."""
    return secrets.token_hex(16)


@dataclass
class Lease:
    """What an instance remembers about one name it holds."""

    name: str
    owner: str
    ttl_seconds: float
    # Monotonic instant after which a lease backend's server may have freed the lock.
    # Taken before the acquire round trip, so the local view never outlives the server's.
    expires_at: float
    fence: int | None = None
    lost: bool = False


class BaseLock(ABC):
    """Shared implementation of `DistributedLock`; subclasses supply the I/O."""

    backend_name: ClassVar[str] = "lock"
    ttl_honoured: ClassVar[bool] = True
    session_scoped: ClassVar[bool] = False
    cross_process: ClassVar[bool] = True
    supports_fencing: ClassVar[bool] = False
    #: Driver exceptions that mean "the backend failed"; translated to LockBackendError.
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError,)

    def __init__(self, *, target: str = "", secrets: tuple[str, ...] = ()) -> None:
        # `target` is an already-redacted description of where the server is.
        self._target = target
        self._secrets = secrets
        self._state_mutex = threading.Lock()
        self._held: dict[str, Lease] = {}
        self._in_flight: set[str] = set()

    # -- public API -------------------------------------------------------------

    def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        """Win `name` now or return False; never waits for a holder to let go."""
        return self._try_acquire(name, ttl_seconds, fenced=False) is not None

    def try_acquire_fenced(self, name: str, ttl_seconds: float) -> int | None:
        """Like `try_acquire`, but return the fencing token of the new holding (or None).

        The token is strictly greater than every earlier token for `name` on this
        backend, so a guarded resource can refuse writes stamped with an older one.
        """
        if not self.supports_fencing:
            raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")
        lease = self._try_acquire(name, ttl_seconds, fenced=True)
        return None if lease is None else lease.fence

    def release(self, name: str) -> None:
        """Give `name` back if this instance holds it; otherwise do nothing.

        Never raises for a backend failure (it runs in `finally` blocks): the lock is
        then either gone with its session or will expire, and a warning says so.
        """
        validate_lock_name(name)
        with self._state_mutex:
            lease = self._held.get(name)
            if lease is None or name in self._in_flight:
                return
            self._in_flight.add(name)
        try:
            confirmed = self._release(name, lease.owner)
        except self.driver_errors as err:
            logger.warning(
                "%s lock %r: release failed (%s); the lock is lost or will expire",
                self.backend_name,
                name,
                self._describe(err),
            )
            if self.ttl_honoured and time.monotonic() < lease.expires_at:
                # Keep the lease so a later release can still free it early.
                with self._state_mutex:
                    self._in_flight.discard(name)
                return
            confirmed = True  # nothing more can be done; forget it below
        with self._state_mutex:
            self._in_flight.discard(name)
            if self._held.get(name) is lease:
                del self._held[name]
        if not confirmed:
            logger.warning(
                "%s lock %r was lost before release: another holder may have run meanwhile",
                self.backend_name,
                name,
            )

    def renew(self, name: str, ttl_seconds: float) -> bool:
        """Extend a held lease to `ttl_seconds` from now; False (and marked lost) if gone.

        Session backends check that their session still holds the lock instead.
        """
        ttl = validate_ttl(ttl_seconds)
        with self._state_mutex:
            lease = self._held.get(validate_lock_name(name))
        if lease is None or lease.lost:
            return False
        started = time.monotonic()
        try:
            kept = self._renew(name, lease.owner, ttl)
        except self.driver_errors as err:
            logger.warning(
                "%s lock %r: renewal failed (%s)", self.backend_name, name, self._describe(err)
            )
            kept = False
        if kept:
            lease.expires_at = started + ttl
        else:
            lease.lost = True
            logger.error("%s lock %r is lost: it was not renewed", self.backend_name, name)
        return kept

    def forget(self, name: str) -> None:
        """Stop tracking `name` here without a round trip; the server's lease runs out by its TTL.

        For a hold that must outlive this process's interest in it, such as a fire claim
        kept for its grace window: it is never renewed or released, and without this
        every such name would stay in the local bookkeeping forever. Lease backends
        only, or a hold already reported lost: a session backend's live lock would stay
        held until its connection closes, so it must be released instead.
        """
        with self._state_mutex:
            lease = self._held.get(validate_lock_name(name))
            if lease is None:
                return
            if not self.ttl_honoured and not lease.lost:
                raise NotImplementedError(
                    f"the {self.backend_name} backend holds {name!r} for its session; "
                    "release it instead"
                )
            del self._held[name]

    def is_held(self, name: str) -> bool:
        """Whether this instance believes it holds `name` (local view, no round trip)."""
        with self._state_mutex:
            lease = self._held.get(name)
        return lease is not None and not lease.lost and not self._locally_expired(lease)

    def is_lost(self, name: str) -> bool:
        """Whether a renewal or the session reported `name` lost while it was held."""
        with self._state_mutex:
            lease = self._held.get(name)
        return lease is not None and lease.lost

    def fencing_token(self, name: str) -> int | None:
        """The fencing token of the current holding of `name`, if it was acquired fenced."""
        with self._state_mutex:
            lease = self._held.get(name)
        return None if lease is None else lease.fence

    @contextmanager
    def hold(self, name: str, ttl_seconds: float) -> Iterator[bool]:
        """`with lock.hold(name, ttl) as acquired:`; see `firefly_scheduling.hold`."""
        with hold(self, name, ttl_seconds) as acquired:
            yield acquired

    def close(self) -> None:
        """Release every held name and drop connections; safe to call twice."""
        with self._state_mutex:  # other threads may still acquire and release meanwhile
            names = list(self._held)
        try:
            for name in names:
                self.release(name)
        finally:
            self._close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._target!r})"

    # -- hooks for subclasses ---------------------------------------------------

    @abstractmethod
    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        """One round trip: take `name` for `owner` unless someone holds it."""

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        """Acquire and return the new fencing token; override to do both in one round trip."""
        if not self._acquire(name, owner, ttl_seconds):
            return None
        try:
            return self._fence(name)
        except BaseException:
            try:
                self._release(name, owner)
            except self.driver_errors as err:  # keep the fence's error; the lease will expire
                logger.warning(
                    "%s lock %r: release after a failed fence failed too (%s)",
                    self.backend_name,
                    name,
                    self._describe(err),
                )
            raise

    @abstractmethod
    def _release(self, name: str, owner: str) -> bool:
        """Free `name` only if `owner` holds it; return whether it did."""

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        """Extend `owner`'s hold on `name`; return False if it no longer holds it."""
        raise NotImplementedError(f"the {self.backend_name} backend cannot renew leases")

    def _fence(self, name: str) -> int:
        """Increment and return the fencing counter of `name`."""
        raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")

    def _close(self) -> None:  # noqa: B027 - optional hook; most backends hold no connection
        """Drop connections; the default has none."""

    # -- shared machinery ---------------------------------------------------------

    def _try_acquire(self, name: str, ttl_seconds: float, *, fenced: bool) -> Lease | None:
        name = validate_lock_name(name)
        ttl = validate_ttl(ttl_seconds)
        with self._state_mutex:
            current = self._held.get(name)
            if name in self._in_flight or (
                current is not None and not self._locally_expired(current)
            ):
                return None
            self._in_flight.add(name)
        try:
            owner = new_owner_token()
            started = time.monotonic()
            try:
                if fenced:
                    fence = self._acquire_fenced(name, owner, ttl)
                    acquired = fence is not None
                else:
                    fence, acquired = None, self._acquire(name, owner, ttl)
            except ConfigurationError:
                raise
            except self.driver_errors as err:
                raise LockBackendError(
                    f"{self.backend_name} lock backend {self._target} failed while acquiring "
                    f"{name!r}: {self._describe(err)}"
                ) from err
            if not acquired:
                return None
            lease = Lease(name, owner, ttl, started + ttl, fence)
            with self._state_mutex:
                self._held[name] = lease
            return lease
        finally:
            with self._state_mutex:
                self._in_flight.discard(name)

    def _locally_expired(self, lease: Lease) -> bool:
        # A lease backend's server frees the lock at the TTL; past it, asking the
        # server again is the only honest answer (and the old owner token is dropped).
        return self.ttl_honoured and time.monotonic() >= lease.expires_at

    def _describe(self, err: BaseException) -> str:
        text = scrub(str(err), self._secrets) or "no detail"
        return f"{type(err).__name__}: {text}"
