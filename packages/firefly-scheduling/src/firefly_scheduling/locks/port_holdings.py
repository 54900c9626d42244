# Generated from port_holdings_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`holding_lock(lock)`: the holdings API for any lock, including one with only the port.

The library's own code (the fire runner, the keep-alive, `hold()`) acts on holdings,
never on names. Every `BaseLock` hands out holdings and takes claims itself
(`HoldingLock`, `ClaimingLock`); this module gives a lock that implements
only `DistributedLock` (a third-party one) the same interface.

Limit of that adaptation: such a lock releases and renews by NAME, so the wrapper
can only refuse a lapsed holding's late release while a newer holding of the same
name exists in this wrapper. Another process's newer holding stays protected by the
backend's own owner check, which the port requires. A third-party backend that
wants the full guarantee implements `HoldingLock` itself (or subclasses
`BaseLock`).

Written once, for asyncio, in `locks/port_holdings_async.py`; the synchronous flavour in
`locks/port_holdings.py` is generated from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

import time

from firefly_scheduling.locks.holding import Holding, HoldingLedger
from firefly_scheduling.locks.port import (
    ClaimingLock,
    DistributedLock,
    FencedLock,
    HoldingLock,
    RenewableLock,
    capabilities_of,
    check_flavour,
)
from firefly_scheduling.locks.validation import validate_wait
from firefly_scheduling.locks.waiting import Backoff, Waiters, sleep_until_woken


def holding_lock(lock: DistributedLock) -> HoldingLock:
    """`lock` itself when it hands out holdings, else `PortOnlyHoldings(lock)`."""
    check_flavour(lock, asynchronous=False)
    if isinstance(lock, HoldingLock):
        return lock
    return PortOnlyHoldings(lock)


def claiming_lock(lock: DistributedLock) -> ClaimingLock:
    """`lock` itself when it takes fire claims, else `PortOnlyHoldings(lock)`."""
    check_flavour(lock, asynchronous=False)
    if isinstance(lock, ClaimingLock):
        return lock
    return PortOnlyHoldings(lock)


class PortOnlyHoldings:
    """Holdings and claims over a lock that has only the port (see the module doc)."""

    def __init__(self, lock: DistributedLock) -> None:
        self._lock = lock
        self._capabilities = capabilities_of(lock)
        self._ledger = HoldingLedger(ttl_honoured=self._capabilities.ttl_honoured)
        self._waiters = Waiters()

    def acquire(
        self, name: str, ttl_seconds: float, *, wait: float = 0.0, fenced: bool = False
    ) -> Holding | None:
        """Try once, or poll with a capped, jittered backoff for up to `wait` seconds:
        a lock with only the port has no way to wait on its server."""
        seconds = validate_wait(wait)
        if seconds == 0:
            return self._acquire_once(name, ttl_seconds, fenced=fenced)
        deadline = time.monotonic() + seconds
        with self._waiters.turn(name, deadline) as waiter:
            if waiter is None:
                return None
            backoff = Backoff()
            while True:
                holding = self._acquire_once(name, ttl_seconds, fenced=fenced)
                if holding is not None or time.monotonic() >= deadline:
                    return holding
                sleep_until_woken(waiter, min(deadline, time.monotonic() + backoff.next()))

    def _acquire_once(self, name: str, ttl_seconds: float, *, fenced: bool) -> Holding | None:
        reservation = self._ledger.reserve(name, ttl_seconds)
        if reservation is None:
            return None
        holding: Holding | None = None
        try:
            if fenced:
                if not (self._capabilities.fenced and isinstance(self._lock, FencedLock)):
                    raise NotImplementedError(f"{self._lock!r} has no fencing tokens")
                token = self._lock.try_acquire_fenced(reservation.name, reservation.ttl_seconds)
                if token is not None:
                    holding = self._ledger.record(reservation, token)
            elif self._lock.try_acquire(reservation.name, reservation.ttl_seconds):
                holding = self._ledger.record(reservation)
            return holding
        finally:
            if holding is None:
                self._ledger.abandon(reservation)

    def release_holding(self, holding: Holding) -> None:
        if not self._ledger.begin_release(holding):
            return
        try:
            if not holding.lost and self._ledger.current(holding.name) is holding:
                self._lock.release(holding.name)
        finally:
            self._ledger.end_release(holding, done=True)
            self._waiters.freed(holding.name)

    def renew_holding(self, holding: Holding, ttl_seconds: float) -> bool:
        if not (self._capabilities.renewable and isinstance(self._lock, RenewableLock)):
            return False
        if holding.lost or holding.released or self._ledger.current(holding.name) is not holding:
            return False
        started = time.monotonic()
        if self._lock.renew(holding.name, ttl_seconds):
            self._ledger.renewed(holding, started)
            return True
        self._ledger.mark_lost([holding])
        return False

    def try_claim(self, name: str, seconds: float) -> bool:
        """A plain acquisition that is never released: its TTL ends it."""
        return self._lock.try_acquire(name, seconds)

    def try_acquire(self, name: str, ttl_seconds: float) -> bool:
        return self._lock.try_acquire(name, ttl_seconds)

    def release(self, name: str) -> None:
        self._lock.release(name)

    def __repr__(self) -> str:
        return f"PortOnlyHoldings({self._lock!r})"
