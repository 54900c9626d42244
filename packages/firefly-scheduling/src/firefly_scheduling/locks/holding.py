"""`Holding`: one acquisition of a name, and `HoldingLedger`, a lock's record of them.

Every acquisition is its own holding, with its own owner token, lease and fate.
Looking a lease up by NAME is how a late release frees a newer holding: a task
whose lease lapsed (a stall longer than the TTL) and another task of the same
process that then took the same name share a name, never a holding. So release and
renewal act on the holding handle; the name is only a key of the port's by-name
calls (`release(name)` acts on the name's current holding).

A forked child inherits a copy of the ledger but none of the holdings: the leases
are the parent's. `forks` makes the child's copy mark them lost and forget them, so
the child neither believes it holds them nor releases or renews them with the
parent's owner tokens (which the server would accept).

The ledger is bookkeeping only, no I/O and no awaiting, so the synchronous and the
asyncio lock drivers share it: each critical section is a few dictionary operations
under a `threading.Lock`, which never blocks an event loop for long.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from firefly_scheduling.concurrency.forks import reset_in_forked_child
from firefly_scheduling.locks.validation import validate_lock_name, validate_ttl


def new_owner_token() -> str:
    """A fresh, unguessable token identifying one acquisition (never `uuid1`)."""
    return secrets.token_hex(16)


@dataclass(eq=False)
class Holding:
    """One acquisition: what its holder may release, renew and be told about.

    * `owner`: the token the server stores for this acquisition (lease backends) and
      checks on release and renewal, so a holding can only ever free itself.
    * `expires_at`: the monotonic instant after which a lease backend's server may
      have freed it. Taken BEFORE the acquire round trip, so the local view never
      outlives the server's. Infinite on session backends.
    * `fence`: the fencing token, when acquired fenced.
    * `lost`: set for good once the backend said the holding is gone (a renewal
      refused, its session ended), or once it lapsed without a renewal.
    * `released`: set once released; a released holding is never released again.
    """

    name: str
    owner: str
    ttl_seconds: float
    expires_at: float
    fence: int | None = None
    lost: bool = False
    released: bool = False

    def lapsed(self, now: float | None = None) -> bool:
        """Whether the lease may have run out on the server (by the monotonic clock)."""
        return (time.monotonic() if now is None else now) >= self.expires_at

    def remaining(self, now: float | None = None) -> float:
        """Seconds until the lease may run out on the server (negative once lapsed)."""
        return self.expires_at - (time.monotonic() if now is None else now)

    @property
    def valid(self) -> bool:
        """Neither lost, released nor lapsed: the holder may still act as the owner."""
        return not self.lost and not self.released and not self.lapsed()


@dataclass(frozen=True)
class Reservation:
    """An acquisition under way: its name, TTL, owner token and start instant."""

    name: str
    ttl_seconds: float
    owner: str
    started: float


class HoldingLedger:
    """The holdings of one lock instance, by name; thread-safe.

    * `ttl_honoured`: the server frees a lease at its TTL, so a lapsed holding no
      longer blocks a new acquisition of its name by this instance. Otherwise (session
      backends) a holding never lapses.
    """

    def __init__(
        self, *, ttl_honoured: bool, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl_honoured = ttl_honoured
        self._monotonic = monotonic
        self._mutex = threading.Lock()
        self._current: dict[str, Holding] = {}
        self._acquiring: set[str] = set()
        self._releasing: set[int] = set()
        reset_in_forked_child(self, HoldingLedger._after_fork_in_child)

    # -- acquisition ------------------------------------------------------------------

    def reserve(
        self, name: str, ttl_seconds: float, owner: str | None = None
    ) -> Reservation | None:
        """Start acquiring `name`; None when this instance holds or is acquiring it.

        The lock is not re-entrant, even where the server's lock is (PostgreSQL,
        MySQL): the refusal happens here, before any statement is sent. `owner` is the
        token a waiter prepared for all its attempts (see `locks.base_waiting_async`);
        by default each acquisition gets a fresh one.
        """
        name = validate_lock_name(name)
        ttl = validate_ttl(ttl_seconds)
        with self._mutex:
            current = self._current.get(name)
            if name in self._acquiring or (current is not None and self._blocks(current)):
                return None
            self._acquiring.add(name)
        return Reservation(name, ttl, owner or new_owner_token(), self._monotonic())

    def record(self, reservation: Reservation, fence: int | None = None) -> Holding:
        """The acquisition of `reservation` was won: it is now the name's holding."""
        expires_at = (
            reservation.started + reservation.ttl_seconds if self._ttl_honoured else float("inf")
        )
        holding = Holding(
            reservation.name, reservation.owner, reservation.ttl_seconds, expires_at, fence
        )
        with self._mutex:
            self._current[reservation.name] = holding
            self._acquiring.discard(reservation.name)
        return holding

    def abandon(self, reservation: Reservation) -> None:
        """The acquisition of `reservation` was lost or failed."""
        with self._mutex:
            self._acquiring.discard(reservation.name)

    # -- lookups ----------------------------------------------------------------------

    def current(self, name: str) -> Holding | None:
        """The newest holding of `name`, whatever its state."""
        with self._mutex:
            return self._current.get(name)

    def holdings(self) -> list[Holding]:
        """Every holding still recorded."""
        with self._mutex:
            return list(self._current.values())

    # -- release ----------------------------------------------------------------------

    def begin_release(self, holding: Holding) -> bool:
        """Claim the right to release `holding`; False when it is released or being so."""
        with self._mutex:
            if holding.released or id(holding) in self._releasing:
                return False
            self._releasing.add(id(holding))
            return True

    def end_release(self, holding: Holding, *, done: bool) -> None:
        """Finish a release; `done=False` keeps `holding` so that a later release may retry."""
        with self._mutex:
            self._releasing.discard(id(holding))
            if not done:
                return
            holding.released = True
            if self._current.get(holding.name) is holding:
                del self._current[holding.name]

    # -- renewal and loss -------------------------------------------------------------

    def renewed(self, holding: Holding, started: float) -> None:
        """A renewal sent at `started` extended `holding` by its TTL."""
        if self._ttl_honoured:
            holding.expires_at = started + holding.ttl_seconds

    def mark_lost(self, holdings: list[Holding] | None = None) -> list[Holding]:
        """Mark `holdings` (default: every live one) lost; return those newly marked."""
        with self._mutex:
            chosen = list(self._current.values()) if holdings is None else holdings
            newly = [holding for holding in chosen if not holding.lost and not holding.released]
            for holding in newly:
                holding.lost = True
        return newly

    def forget_all(self) -> None:
        """Drop every record without a round trip (a forked child's inherited state)."""
        with self._mutex:
            self._current.clear()
            self._acquiring.clear()
            self._releasing.clear()

    def _after_fork_in_child(self) -> None:
        """In a forked child: every holding is the parent's; lose it here and forget it.

        Marked lost (not released) so that a `Holding` handle the child still has
        refuses to release or renew: a lost holding is only ever forgotten. The mutex
        is replaced, since a parent thread may have held it at the fork.
        """
        self._mutex = threading.Lock()
        for holding in self._current.values():
            holding.lost = True
        self._current.clear()
        self._acquiring.clear()
        self._releasing.clear()

    # -- helpers ----------------------------------------------------------------------

    def _blocks(self, holding: Holding) -> bool:
        """Whether `holding` keeps this instance from acquiring its name again."""
        if holding.released or holding.lost:
            return False
        # A lease backend's server frees the lock at the TTL; past it, asking the
        # server again is the only honest answer.
        return not (self._ttl_honoured and holding.lapsed(self._monotonic()))
