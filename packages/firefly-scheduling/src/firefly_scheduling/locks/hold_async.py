"""`ahold`: the lock as a context manager, for code that has nothing to do with scheduling.

`async with ahold(lock, name, ttl, wait=..., keep_alive=...) as held:` takes the lock
(trying once, or waiting up to `wait` seconds), yields an `AsyncHold` that is truthy
exactly when it was won, keeps the lease alive while the block runs if asked, and
releases that holding on exit.

Written once, for asyncio, in `locks/hold_async.py`; the synchronous `hold` in `locks/hold.py`
is generated from it by `tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncHold Hold
# async-to-sync: rename AsyncKeepAlive KeepAlive
# async-to-sync: rename firefly_scheduling.locks.asyncio_keepalive firefly_scheduling.locks.keepalive  # noqa: E501
# async-to-sync: rename asyncio.Event threading.Event

from __future__ import annotations

import asyncio  # sync: import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.asyncio_keepalive import AsyncKeepAlive
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import AsyncDistributedLock, AsyncHoldingLock, capabilities_of
from firefly_scheduling.locks.port_holdings_async import async_holding_lock
from firefly_scheduling.locks.validation import validate_lock_name, validate_ttl, validate_wait


class AsyncHold:
    """What `ahold` yields: truthy exactly when the lock was won.

    * `token`: the holding's fencing token where the backend fences, else None;
    * `lost`: True once the holding is known to be gone (a renewal refused or failed
      past the lease, its session ended, its lease lapsed unrenewed);
    * `lost_event`: set when a keep-alive finds the holding lost; `await
      held.wait_lost()` waits for it (a watchdog task, `asyncio.wait`).
    """

    def __init__(self, holding: Holding | None) -> None:
        self.holding = holding
        self.lost_event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.holding is not None

    @property
    def token(self) -> int | None:
        """The fencing token of the holding (None when lost at acquisition or unfenced)."""
        return None if self.holding is None else self.holding.fence

    @property
    def lost(self) -> bool:
        """Whether the lock, once won, is known to be gone: never True when it was not won."""
        holding = self.holding
        if holding is None:
            return False
        return (
            self.lost_event.is_set() or holding.lost or (not holding.released and holding.lapsed())
        )

    if ASYNC:

        async def wait_lost(self) -> None:
            """Return once a keep-alive found the holding lost (never, while it holds)."""
            await self.lost_event.wait()

    else:

        def wait_lost(self, timeout: float | None = None) -> bool:
            """Wait until a keep-alive found the holding lost; False when `timeout` passed."""
            return self.lost_event.wait(timeout)

    def __repr__(self) -> str:
        if self.holding is None:
            return "AsyncHold(not won)"
        return f"AsyncHold({self.holding.name!r}, token={self.token!r}, lost={self.lost!r})"


def check_keep_alive(lock: object) -> None:
    """Refuse `keep_alive=True` for a lock that cannot renew: never a silent no-op."""
    if not capabilities_of(lock).renewable:
        raise ValueError(
            f"keep_alive=True needs a lock that renews its leases, and {lock!r} declares "
            "no renewal (capabilities.renewable is False)"
        )


@asynccontextmanager
async def ahold(
    lock: AsyncDistributedLock,
    name: str,
    ttl_seconds: float,
    *,
    wait: float = 0.0,
    keep_alive: bool = False,
) -> AsyncIterator[AsyncHold]:
    """Take `name`, waiting up to `wait` seconds; yield an `AsyncHold`; release on exit.

    `wait=0` tries once, so a caller that loses simply does not do the guarded work;
    `math.inf` waits for ever. With `keep_alive=True` the lease is renewed every
    `ttl_seconds / 3` while the block runs, by the process's one renewer, and a
    failed renewal sets `held.lost`. The release acts on the holding this call took,
    never on the name: if the lease lapsed meanwhile and another task of the process
    took the name again, that newer holding stays held. Works with any
    `AsyncDistributedLock`, including third-party ones (their waits poll)::

        async with ahold(lock, "reindex", 600, wait=30, keep_alive=True) as held:
            if held:
                await reindex(fence=held.token)
    """
    validate_lock_name(name)
    validate_ttl(ttl_seconds)
    validate_wait(wait)
    if keep_alive:
        check_keep_alive(lock)
    holdings = async_holding_lock(lock)
    fenced = capabilities_of(lock).fenced
    holding = await holdings.acquire(name, ttl_seconds, wait=wait, fenced=fenced)
    held = AsyncHold(holding)
    try:
        if holding is None or not keep_alive:
            yield held
            return
        async with kept_alive(holdings, holding, ttl_seconds, held):
            yield held
    finally:
        if holding is not None:
            await holdings.release_holding(holding)


@asynccontextmanager
async def kept_alive(
    holdings: AsyncHoldingLock, holding: Holding, ttl_seconds: float, held: AsyncHold
) -> AsyncIterator[None]:
    """Renew `holding` every `ttl_seconds / 3` while the block runs; `held` hears of a loss."""
    if ASYNC:
        keeper = AsyncKeepAlive(
            holdings,
            holding,
            ttl_seconds,
            label=f"hold {holding.name!r}",
            on_lost=held.lost_event.set,
        )
    else:
        keeper = AsyncKeepAlive(
            holdings, holding, ttl_seconds, label=f"hold {holding.name!r}", lost=held.lost_event
        )
    keeper.start()
    try:
        yield
    finally:
        await keeper.stop()
