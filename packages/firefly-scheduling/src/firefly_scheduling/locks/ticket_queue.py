# Generated from ticket_queue_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`TicketQueue`: waiters of every process served in arrival order, by expiring tickets.

A mixin of an adapter's lock, over `locks.base_waiting_async`'s `queues_waiters`
hooks, for backends whose server cannot run the whole rule in one step (etcd,
memcached, the SQL lease tables; Redis runs it as one script, `waiter_queue`).
Without a queue, a free name goes to whichever waiter of whichever process tries
first, and a waiter that just released and tries again at once wins far more often
than its share.

The rules, the same on every backend that mixes this in:

* A wait's first attempt takes a free name only when no ticket is queued for it;
  otherwise, or when it loses, the waiter queues a ticket at the end
  (`_join_queue`). A try (`wait=0`) and the fire path never look at the queue.
* Every later attempt first keeps its ticket alive (`_keep_place`, unless it did
  less than `KEEP_AGAIN_AFTER_SECONDS` ago) and takes the name only when no live
  ticket is ahead of it (`_first_in_queue`; checked and taken in one step where the
  backend can, `_take_if_first`). A ticket lives `ticket_seconds()` past being kept:
  the longest pause between attempts plus `TICKET_GRACE_SECONDS`. So a killed
  waiter holds the queue at most that long, and a stalled one that missed it only
  loses its place and queues again at the end.
* The ticket goes when its wait wins, and when the wait ends without winning
  (timed out, cancelled, interrupted, failed), removed even under cancellation; a
  removal that fails is logged, and the ticket lapses.

Only the first waiter of an instance talks to the server (`waiting.AsyncWaiters`),
so the server queues one ticket per instance and name; the waiters behind it in the
instance follow in their own arrival order.

Written once, for asyncio; `locks/ticket_queue.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.locks.holding import new_owner_token
from firefly_scheduling.locks.waiting import LONGEST_PAUSE_SECONDS, Backoff

logger = logging.getLogger("firefly_scheduling.locks")

#: How long a ticket outlives the longest pause its waiter takes between attempts:
#: the scheduling delay a live waiter may suffer between waking and its next attempt.
TICKET_GRACE_SECONDS = 2.0
#: An attempt this soon after the ticket was last kept alive does not keep it again
#: (a round trip saved when a release wakes the waiter); the grace covers the rest.
KEEP_AGAIN_AFTER_SECONDS = TICKET_GRACE_SECONDS / 4
#: See `TicketQueue.first_waiter_longest_pause`.
FIRST_WAITER_LONGEST_PAUSE_SECONDS = 0.1


@dataclass
class Place:
    """One waiter's place in a name's queue, for the length of its turn."""

    #: The ticket's token, unique to this turn.
    ticket: str
    #: What the backend knows the queued ticket by; None while it is not queued.
    spot: object | None = None
    #: When (monotonic, before sending) the ticket was queued or last kept alive.
    kept_at: float = 0.0
    #: The last attempt found no live ticket ahead of this one.
    first: bool = False


class Taken(NamedTuple):
    """What an attempt in turn found and did (`TicketQueue._take_if_first`)."""

    #: No live ticket was ahead of the waiter's.
    first: bool
    #: The attempt's answer, as `_take_when_first`'s; lost when not `first`.
    answer: int | bool | None
    #: The win removed the waiter's ticket in the same step: nothing left to remove.
    left: bool = False


class TicketQueue(BaseLock):
    """The waiters' queue rules (see the module doc); a backend supplies its round trips."""

    queues_waiters: ClassVar[bool] = True
    #: The longest pause of the first waiter between its attempts, where the backend
    #: polls: it is next, so its pause is the hand-over's delay.
    first_waiter_longest_pause: float = FIRST_WAITER_LONGEST_PAUSE_SECONDS

    def __init__(self, *, target: str = "", secrets: tuple[str, ...] = ()) -> None:
        super().__init__(target=target, secrets=secrets)
        #: The place of this instance's waiter in its turn, per name (one at a time).
        self._places: dict[str, Place] = {}

    # -- hooks for the backend -----------------------------------------------------------

    def _take_when_first(
        self, name: str, owner: str, ttl_seconds: float, *, fenced: bool
    ) -> int | bool | None:
        """One plain attempt on `name` (as `_acquire` or `_acquire_fenced` would make it,
        but not through them: those count as attempts of their own)."""
        raise NotImplementedError

    def _take_if_first(
        self, name: str, spot: object | None, owner: str, ttl_seconds: float, *, fenced: bool
    ) -> Taken:
        """Whether no live ticket is ahead of `spot` (`_first_in_queue`), and if none is,
        one attempt (`_take_when_first`). A backend that checks and takes in one round
        trip overrides it, and may remove the ticket with the win (`Taken.left`)."""
        if not self._first_in_queue(name, spot):
            return Taken(first=False, answer=None if fenced else False)
        answer = self._take_when_first(name, owner, ttl_seconds, fenced=fenced)
        return Taken(first=True, answer=answer)

    def _join_queue(self, name: str, ticket: str, seconds: float) -> object:
        """Queue `ticket` at the end of `name`'s queue, alive for `seconds`; return what
        the backend knows it by. An interrupted join may leave a ticket that lapses."""
        raise NotImplementedError

    def _keep_place(self, name: str, spot: object, seconds: float) -> bool:
        """Keep the queued ticket alive for `seconds` more; False when it had lapsed."""
        raise NotImplementedError

    def _first_in_queue(self, name: str, spot: object | None) -> bool:
        """Whether no live ticket of `name` is ahead of `spot` (None: the queue is empty)."""
        raise NotImplementedError

    def _leave_queue(self, name: str, spot: object) -> None:
        """Remove the queued ticket (a no-op when it is gone)."""
        raise NotImplementedError

    def ticket_seconds(self) -> float:
        """How long a ticket lives past an attempt: the longest pause before the next
        attempt (`LONGEST_PAUSE_SECONDS` for the core's backoff), plus the grace."""
        return LONGEST_PAUSE_SECONDS + TICKET_GRACE_SECONDS

    # -- the waiting hooks --------------------------------------------------------------

    @contextmanager
    def _waiting_turn(self, name: str) -> Iterator[None]:
        """A place for the turn, queued by an attempt and removed at the turn's end."""
        place = self._places[name] = Place(new_owner_token())
        try:
            yield
        finally:
            del self._places[name]
            if place.spot is not None:
                self._leave_shielded(name, place.spot)

    def _acquire_in_turn(
        self, name: str, owner: str, ttl_seconds: float, *, fenced: bool
    ) -> int | bool | None:
        """One attempt of the wait, by the queue's rules (see the module doc)."""
        place = self._places[name]
        seconds = self.ticket_seconds()
        if place.spot is not None and time.monotonic() - place.kept_at > KEEP_AGAIN_AFTER_SECONDS:
            sent = time.monotonic()
            if self._keep_place(name, place.spot, seconds):
                place.kept_at = sent
            else:
                place.spot = None  # lapsed (a stalled waiter): queue again, at the end
        taken = self._take_if_first(name, place.spot, owner, ttl_seconds, fenced=fenced)
        place.first = taken.first
        won = taken.answer is not None if fenced else bool(taken.answer)
        if won and place.spot is not None:
            spot, place.spot = place.spot, None
            if not taken.left:
                self._leave_shielded(name, spot)
        elif not won and place.spot is None:
            self._join(name, place, seconds)
        return taken.answer

    def _pause_after_loss(self, name: str, backoff: Backoff) -> float:
        """The backend's pause, at most `first_waiter_longest_pause` for the first waiter
        of a backend that polls."""
        pause = super()._pause_after_loss(name, backoff)
        place = self._places.get(name)
        if place is not None and place.first and not self.notified_wait:
            return min(pause, self.first_waiter_longest_pause)
        return pause

    def _join(self, name: str, place: Place, seconds: float) -> None:
        sent = time.monotonic()
        place.spot = self._join_queue(name, place.ticket, seconds)
        place.kept_at = sent

    def _leave_shielded(self, name: str, spot: object) -> None:
        """`_leave_queue`, run to its end even when the wait is being cancelled; a
        failure is logged: the ticket lapses anyway."""
        self._leave_quietly(name, spot)

    def _leave_quietly(self, name: str, spot: object) -> None:
        try:
            self._leave_queue(name, spot)
        except Exception as err:  # noqa: BLE001 - the ticket lapses anyway; say so
            logger.warning(
                "%s lock %r: removing a waiter's ticket from the queue failed (%s); it "
                "lapses within %g s",
                self.backend_name,
                name,
                self._describe(err),
                self.ticket_seconds(),
            )
