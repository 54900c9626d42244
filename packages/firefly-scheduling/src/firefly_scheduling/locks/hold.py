# Generated from hold_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`hold`: the lock as a context manager, for code that has nothing to do with scheduling.

`with hold(lock, name, ttl, wait=..., keep_alive=...) as held:` takes the lock
(trying once, or waiting up to `wait` seconds), yields an `Hold` that is truthy
exactly when it was won, keeps the lease alive while the block runs if asked, and
releases that holding on exit.

Written once, for asyncio, in `locks/hold_async.py`; the synchronous `hold` in `locks/hold.py`
is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.keepalive import KeepAlive
from firefly_scheduling.locks.port import DistributedLock, HoldingLock, capabilities_of
from firefly_scheduling.locks.port_holdings import holding_lock
from firefly_scheduling.locks.validation import validate_lock_name, validate_ttl, validate_wait


class Hold:
    """What `hold` yields: truthy exactly when the lock was won.

    * `token`: the holding's fencing token where the backend fences, else None;
    * `lost`: True once the holding is known to be gone (a renewal refused or failed
      past the lease, its session ended, its lease lapsed unrenewed);
    * `lost_event`: set when a keep-alive finds the holding lost; `await
      held.wait_lost()` waits for it (a watchdog task, `asyncio.wait`).
    """

    def __init__(self, holding: Holding | None) -> None:
        self.holding = holding
        self.lost_event = threading.Event()

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

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Wait until a keep-alive found the holding lost; False when `timeout` passed."""
        return self.lost_event.wait(timeout)

    def __repr__(self) -> str:
        if self.holding is None:
            return "Hold(not won)"
        return f"Hold({self.holding.name!r}, token={self.token!r}, lost={self.lost!r})"


def check_keep_alive(lock: object) -> None:
    """Refuse `keep_alive=True` for a lock that cannot renew: never a silent no-op."""
    if not capabilities_of(lock).renewable:
        raise ValueError(
            f"keep_alive=True needs a lock that renews its leases, and {lock!r} declares "
            "no renewal (capabilities.renewable is False)"
        )


@contextmanager
def hold(
    lock: DistributedLock,
    name: str,
    ttl_seconds: float,
    *,
    wait: float = 0.0,
    keep_alive: bool = False,
) -> Iterator[Hold]:
    """Take `name`, waiting up to `wait` seconds; yield an `Hold`; release on exit.

    `wait=0` tries once, so a caller that loses simply does not do the guarded work;
    `math.inf` waits for ever. With `keep_alive=True` the lease is renewed every
    `ttl_seconds / 3` while the block runs, by the process's one renewer, and a
    failed renewal sets `held.lost`. The release acts on the holding this call took,
    never on the name: if the lease lapsed meanwhile and another task of the process
    took the name again, that newer holding stays held. Works with any
    `DistributedLock`, including third-party ones (their waits poll)::

        with hold(lock, "reindex", 600, wait=30, keep_alive=True) as held:
            if held:
                reindex(fence=held.token)
    """
    validate_lock_name(name)
    validate_ttl(ttl_seconds)
    validate_wait(wait)
    if keep_alive:
        check_keep_alive(lock)
    holdings = holding_lock(lock)
    fenced = capabilities_of(lock).fenced
    holding = holdings.acquire(name, ttl_seconds, wait=wait, fenced=fenced)
    held = Hold(holding)
    try:
        if holding is None or not keep_alive:
            yield held
            return
        with kept_alive(holdings, holding, ttl_seconds, held):
            yield held
    finally:
        if holding is not None:
            holdings.release_holding(holding)


@contextmanager
def kept_alive(
    holdings: HoldingLock, holding: Holding, ttl_seconds: float, held: Hold
) -> Iterator[None]:
    """Renew `holding` every `ttl_seconds / 3` while the block runs; `held` hears of a loss."""
    keeper = KeepAlive(
        holdings, holding, ttl_seconds, label=f"hold {holding.name!r}", lost=held.lost_event
    )
    keeper.start()
    try:
        yield
    finally:
        keeper.stop()
