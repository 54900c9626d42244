"""`AsyncBaseLock`: the behaviour every backend shares, written once.

Written once, for asyncio, in `locks/base_async.py`; the synchronous flavour in
`locks/base.py` is generated from it by `tools/async_to_sync.py`.

A backend subclasses it and implements only its round trips (`_acquire`,
`_release`, and optionally `_acquire_fenced`, `_renew`, `_claim`). Everything a user
relies on regardless of the server is written once, in three layers:

* `locks.backend_hooks_async`: the capabilities a backend declares, its round-trip
  hooks, and driver-error translation with credentials scrubbed;
* `locks.base_claims_async`: fire claims and acquisitions sent together;
* `locks.base_waiting_async`: acquisitions that wait for their name (`wait=`);
* here: the port by name, and holdings: name and TTL validation, the not-re-entrant
  bookkeeping, one `Holding` with a fresh owner token per acquisition
  (`locks.holding`), and release that never raises.
"""

# async-to-sync: rename AsyncWaitingAcquisition WaitingAcquisition
# async-to-sync: rename AsyncHold Hold

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from firefly_scheduling.locks.base_waiting_async import AsyncWaitingAcquisition
from firefly_scheduling.locks.hold_async import AsyncHold, ahold
from firefly_scheduling.locks.holding import Holding, new_owner_token
from firefly_scheduling.locks.validation import validate_lock_name, validate_ttl, validate_wait

logger = logging.getLogger("firefly_scheduling.locks")

__all__ = ["AsyncBaseLock", "Holding", "new_owner_token"]


class AsyncBaseLock(AsyncWaitingAcquisition):
    """The port and its capabilities, implemented once; subclasses do the I/O."""

    # -- the port, by name --------------------------------------------------------------

    async def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        """Win `name` now or return False; never waits for a holder to let go."""
        return await self.acquire(name, ttl_seconds) is not None

    async def try_acquire_fenced(self, name: str, ttl_seconds: float) -> int | None:
        """Like `try_acquire`, but return the fencing token of the new holding (or None).

        The token is strictly greater than every earlier token for `name` on this
        backend, so a guarded resource can refuse writes stamped with an older one.
        """
        holding = await self.acquire(name, ttl_seconds, fenced=True)
        return None if holding is None else holding.fence

    async def release(self, name: str) -> None:
        """Give back the current holding of `name` if this instance has one; else nothing.

        Never raises for a backend failure (it runs in `finally` blocks): the lock is
        then either gone with its session or will expire, and a warning says so. Code
        that holds a `Holding` should call `release_holding`, which can never free a
        newer holding of the same name.
        """
        holding = self._ledger.current(validate_lock_name(name))
        if holding is not None:
            await self.release_holding(holding)

    async def renew(self, name: str, ttl_seconds: float) -> bool:
        """Extend the current holding of `name` to `ttl_seconds` from now; False if gone."""
        holding = self._ledger.current(validate_lock_name(name))
        return holding is not None and await self.renew_holding(holding, ttl_seconds)

    # -- holdings -----------------------------------------------------------------------

    async def acquire(
        self, name: str, ttl_seconds: float, *, wait: float = 0.0, fenced: bool = False
    ) -> Holding | None:
        """Take `name` and return the new `Holding`, or None when it stayed taken.

        `wait` is how many seconds to wait for it: 0 tries once, `math.inf` waits for
        ever (see `locks.base_waiting_async` for how each backend waits). `fenced=True`
        gives the holding a fencing token (backends with fencing only). Raises
        `LockBackendError` when the backend fails.
        """
        if fenced and not self.supports_fencing:
            raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")
        seconds = validate_wait(wait)
        if seconds > 0:
            name, ttl = validate_lock_name(name), validate_ttl(ttl_seconds)
            return await self._acquire_waiting(name, ttl, seconds, fenced=fenced)
        reservation = self._ledger.reserve(name, ttl_seconds)
        if reservation is None:
            return None
        return await self._acquire_reserved(reservation, fenced, 0.0)

    async def release_holding(self, holding: Holding) -> None:
        """Give back `holding` if it is still held; never raises for a backend failure.

        A lost holding is only forgotten: the server already let it go (and a newer
        holding of its name may exist, which a round trip must not touch). A release
        the server refuses (the lock is no longer this holding's) marks it lost, so
        that a fire runner reports the run it guarded as not exclusive.
        """
        if not self._ledger.begin_release(holding):
            return
        done = True
        try:
            if holding.lost:
                return
            try:
                confirmed = await self._release(holding.name, holding.owner)
            except self.driver_errors as err:
                logger.warning(
                    "%s lock %r: release failed (%s); the lock is lost or will expire",
                    self.backend_name,
                    holding.name,
                    self._describe(err),
                )
                # Keep a lease that is still valid, so that a later release may free it early.
                done = not (self.ttl_honoured and not holding.lapsed())
                return
            if not confirmed:
                # The server no longer had it as ours: it lapsed or vanished (a restart)
                # while held, so a newer holder may have overlapped whoever ran under it.
                self._ledger.mark_lost([holding])
                logger.warning(
                    "%s lock %r was lost before release: another holder may have run meanwhile",
                    self.backend_name,
                    holding.name,
                )
        finally:
            self._ledger.end_release(holding, done=done)
            if done:
                self._waiters.freed(holding.name)

    async def renew_holding(self, holding: Holding, ttl_seconds: float) -> bool:
        """Extend `holding` to `ttl_seconds` from now; False when it was not extended.

        The server refusing (the owner token is gone) marks the holding lost. A backend
        error does not, while the lease may still run on the server: the next renewal
        may succeed. Once the lease has lapsed without a renewal, the holding is lost.
        Session backends check that their session still holds the lock instead.
        """
        ttl = validate_ttl(ttl_seconds)
        if holding.lost or holding.released:
            return False
        started = time.monotonic()
        try:
            kept = await self._renew(holding.name, holding.owner, ttl)
        except self.driver_errors as err:
            logger.warning(
                "%s lock %r: renewal failed (%s)",
                self.backend_name,
                holding.name,
                self._describe(err),
            )
            if holding.lapsed():
                self._lose(holding, "its lease lapsed while renewals failed")
            return False
        if kept:
            holding.ttl_seconds = ttl
            self._ledger.renewed(holding, started)
            return True
        self._lose(holding, "the server no longer holds it for this owner")
        return False

    # -- local views, by name ------------------------------------------------------------

    def holding(self, name: str) -> Holding | None:
        """The current holding of `name` by this instance, whatever its state."""
        return self._ledger.current(validate_lock_name(name))

    def is_held(self, name: str) -> bool:
        """Whether this instance believes it holds `name` (local view, no round trip)."""
        holding = self._ledger.current(name)
        return holding is not None and holding.valid

    def is_lost(self, name: str) -> bool:
        """Whether the current holding of `name` was reported lost while it was held."""
        holding = self._ledger.current(name)
        return holding is not None and holding.lost

    def fencing_token(self, name: str) -> int | None:
        """The fencing token of the current holding of `name`, if it was acquired fenced."""
        holding = self._ledger.current(name)
        return None if holding is None else holding.fence

    @asynccontextmanager
    async def hold(
        self, name: str, ttl_seconds: float, *, wait: float = 0.0, keep_alive: bool = False
    ) -> AsyncIterator[AsyncHold]:
        """`async with lock.hold(name, ttl) as held:`; see `ahold`."""
        async with ahold(self, name, ttl_seconds, wait=wait, keep_alive=keep_alive) as held:
            yield held

    async def aclose(self) -> None:
        """Release every holding and drop connections; safe to call twice."""
        try:
            for holding in self._ledger.holdings():
                await self.release_holding(holding)
        finally:
            await self._close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._target!r})"
