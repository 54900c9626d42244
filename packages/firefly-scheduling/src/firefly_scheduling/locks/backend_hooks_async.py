"""`AsyncBackendHooks`: what a lock backend implements, and how its failures read.

The bottom of `AsyncBaseLock` (`locks.base_async`): the capability attributes a backend
declares, the round trips it implements (`_acquire`, `_release`, and optionally
`_acquire_fenced`, `_renew`, `_fence`, `_close`), and the translation of its driver's
errors into `LockBackendError` with credentials scrubbed. Nothing here keeps state
beyond the holding ledger the layers above share.

Capabilities are class attributes, gathered in `capabilities` and read through
`locks.port.capabilities_of` by the contract suite and the scheduler:

* `ttl_honoured`: the server frees the lock when the TTL passes (lease backends).
* `session_scoped`: the lock lives as long as the backend's connection (PostgreSQL,
  MySQL); the TTL is accepted and ignored.
* `cross_process`: the lock excludes other OS processes (False only in memory).
* `supports_fencing`: `try_acquire_fenced` returns fencing tokens.
* `renewable`: `renew` extends a lease (or checks a session still holds the lock).
* `batch_acquires`: `acquire_many` sends several acquisitions as one request (an
  instance attribute: the database backend batches on some dialects only).

Written once, for asyncio; `locks/backend_hooks.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncBackendHooks BackendHooks

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import ClassVar

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.holding import Holding, HoldingLedger
from firefly_scheduling.locks.port import LockCapabilities
from firefly_scheduling.urls.redaction import scrub

logger = logging.getLogger("firefly_scheduling.locks")


class AsyncBackendHooks(ABC):
    """The capabilities and round trips of one backend; `AsyncBaseLock` builds on them."""

    backend_name: ClassVar[str] = "lock"
    ttl_honoured: ClassVar[bool] = True
    session_scoped: ClassVar[bool] = False
    cross_process: ClassVar[bool] = True
    supports_fencing: ClassVar[bool] = False
    renewable: ClassVar[bool] = False
    #: `acquire_many` sends its acquisitions as one request (set by the backend that can).
    batch_acquires: bool = False
    #: A waiter is woken by the server's notification of a release (`_release_signal`).
    notified_wait: ClassVar[bool] = False
    #: The server keeps the waiters' order: the attempts of a wait go through
    #: `_acquire_in_turn`, within the place `_waiting_turn` keeps (`base_waiting_async`).
    queues_waiters: ClassVar[bool] = False
    #: Driver exceptions that mean "the backend failed"; translated to LockBackendError.
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (OSError,)

    def __init__(self, *, target: str = "", secrets: tuple[str, ...] = ()) -> None:
        # `target` is an already-redacted description of where the server is.
        self._target = target
        self._secrets = secrets
        self._ledger = HoldingLedger(ttl_honoured=self.ttl_honoured)

    @property
    def capabilities(self) -> LockCapabilities:
        """What this backend promises beyond the port (see the module doc)."""
        return LockCapabilities(
            ttl_honoured=self.ttl_honoured,
            session_scoped=self.session_scoped,
            cross_process=self.cross_process,
            fenced=self.supports_fencing,
            renewable=self.renewable,
            batch_acquires=self.batch_acquires,
            notified_wait=self.notified_wait,
            ordered_waiters=self.queues_waiters,
        )

    # -- hooks for subclasses ---------------------------------------------------------

    @abstractmethod
    async def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        """One round trip: take `name` for `owner` unless someone holds it."""

    async def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        """Acquire and return the new fencing token; override to do both in one round trip."""
        if not await self._acquire(name, owner, ttl_seconds):
            return None
        try:
            return await self._fence(name)
        except BaseException:
            try:
                await self._release(name, owner)
            except self.driver_errors as err:  # keep the fence's error; the lease will expire
                logger.warning(
                    "%s lock %r: release after a failed fence failed too (%s)",
                    self.backend_name,
                    name,
                    self._describe(err),
                )
            raise

    @abstractmethod
    async def _release(self, name: str, owner: str) -> bool:
        """Free `name` only if `owner` holds it; return whether it did."""

    async def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        """Extend `owner`'s hold on `name`; return False if it no longer holds it."""
        raise NotImplementedError(f"the {self.backend_name} backend cannot renew leases")

    async def _fence(self, name: str) -> int:
        """Increment and return the fencing counter of `name`."""
        raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")

    async def _close(self) -> None:  # noqa: B027 - optional hook; most backends hold no connection
        """Drop connections; the default has none."""

    # -- shared machinery -------------------------------------------------------------

    def _lose(self, holding: Holding, why: str) -> None:
        if self._ledger.mark_lost([holding]):
            logger.error("%s lock %r is lost: %s", self.backend_name, holding.name, why)

    def _backend_error(self, action: str, name: str, err: BaseException) -> LockBackendError:
        return LockBackendError(
            f"{self.backend_name} lock backend {self._target} failed while {action} "
            f"{name!r}: {self._describe(err)}"
        )

    def _describe(self, err: BaseException) -> str:
        text = scrub(str(err), self._secrets) or "no detail"
        return f"{type(err).__name__}: {text}"
