# Generated from base_waiting_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`WaitingAcquisition`: an acquisition that waits, up to `wait` seconds, for its name.

A middle layer of `BaseLock` (`locks.base_async`). `acquire(name, ttl, wait=...)`
with `wait > 0` tries, and while it loses, waits for a chance to try again, in the
way the backend does best:

* **On the server** (`waits_on_server`, the session backends): the attempt itself
  waits, in the server's own queue (`_acquire_within`: PostgreSQL's
  `pg_advisory_lock` under a `lock_timeout`, MySQL's `GET_LOCK(name, timeout)`), so
  the server hands the lock over the moment its holder lets go.
* **On a notification** (`_release_signal`): the backend wakes the waiter when the
  name is released (a Redis message, an etcd watch), and `_pause_after_loss` bounds
  the wait by what the server said of the holder's lease.
* **Otherwise** it sleeps a capped, jittered, exponentially growing pause
  (`waiting.Backoff`) between attempts.

A backend that queues its waiters on the server (`queues_waiters`: Redis; etcd,
memcached and the database through `locks.ticket_queue_async`) keeps a
place for each waiter's turn (`_waiting_turn`), and its attempts within the wait
(`_acquire_in_turn`) take a free name only when theirs is the first place, so that
waiters of different processes are served in the order they arrived. A try
(`wait=0`) never queues.

After a first lost attempt a backend may prepare the later ones (`_prepare_wait`:
etcd grants their lease), which then share one owner token; what was prepared is
undone when the wait ends without winning with it (`_end_wait`). A holding won on a
lease that started before its attempt counts its TTL from that start
(`_lease_started`).

Waiters of one instance for one name are served in arrival order (`waiting.AsyncWaiters`):
only the first talks to the server. A name this instance itself holds is waited for
locally, woken by its release. A cancelled wait (asyncio cancellation, or
`KeyboardInterrupt` in a thread) leaves nothing behind: an attempt it interrupted is
undone with its own owner token, and its turn passes to the next waiter.

Written once, for asyncio; `locks/base_waiting.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.base_claims import ClaimsAndBatches
from firefly_scheduling.locks.holding import Holding, Reservation
from firefly_scheduling.locks.waiting import (
    NOTIFIED_RECHECK_SECONDS,
    Backoff,
    Waiters,
    sleep_until_woken,
)

logger = logging.getLogger("firefly_scheduling.locks")

#: Longest a waiter sleeps before looking again at a name this instance holds itself
#: (a release wakes it at once; a session's end marks the holding lost without one).
LOCAL_RECHECK_SECONDS = 1.0


class WaitingAcquisition(ClaimsAndBatches):
    """Acquisitions that wait for their name (see the module doc)."""

    #: The attempt itself waits on the server (`_acquire_within`), so no pause follows it.
    waits_on_server: ClassVar[bool] = False
    #: Longest a waiter woken by notifications (`notified_wait`) sleeps unwoken before
    #: trying again: what a notification missed costs at most.
    notified_recheck_seconds: float = NOTIFIED_RECHECK_SECONDS

    def __init__(self, *, target: str = "", secrets: tuple[str, ...] = ()) -> None:
        super().__init__(target=target, secrets=secrets)
        self._waiters = Waiters()

    # -- hooks for subclasses ---------------------------------------------------------

    def _acquire_within(
        self, name: str, owner: str, ttl_seconds: float, seconds: float, *, fenced: bool
    ) -> int | bool | None:
        """Take `name` for `owner`, waiting on the server at most `seconds` (finite, > 0).

        Fenced: the new token, or None when still taken; else won or not. Only called
        when `waits_on_server`.
        """
        raise NotImplementedError(f"the {self.backend_name} backend has no server-side wait")

    def _acquire_in_turn(
        self, name: str, owner: str, ttl_seconds: float, *, fenced: bool
    ) -> int | bool | None:
        """One attempt of a waiting acquisition, in the place `_waiting_turn` keeps: it
        takes `name` only if it is free and that place is the first. Fenced: the new
        token, or None when lost; else won or not. Only called when `queues_waiters`.
        """
        raise NotImplementedError(f"the {self.backend_name} backend keeps no queue of waiters")

    @contextmanager
    def _waiting_turn(self, name: str) -> Iterator[None]:
        """While the block runs, this instance's waiter for `name` (one at a time: see
        `waiting.AsyncWaiters`) keeps its place in the server's queue, if the backend
        keeps one; the place is given up when the block ends, however it ends."""
        yield

    @contextmanager
    def _release_signal(self, name: str, wake: Any) -> Iterator[None]:
        """While the block runs, call `wake()` when `name` may have been released.

        The default has no notification: the pauses alone pace the attempts. A backend
        that has one subscribes here, BEFORE the first attempt, so that no release
        between a lost attempt and the pause goes unseen.
        """
        yield

    def _pause_after_loss(self, name: str, backoff: Backoff) -> float:
        """How long to sleep after a lost attempt, unless woken earlier."""
        return backoff.next()

    def _prepare_wait(self, name: str, ttl_seconds: float) -> str | None:
        """After a wait's first lost attempt: the owner token of all its later attempts,
        with what a win needs done ahead on the server, or None (the default: a fresh
        token per attempt, nothing prepared).

        A backend whose win costs more than one write (etcd: a lease grant, then the
        create) does the first here, so that after a release only the last remains.
        """
        return None

    def _end_wait(self, name: str, owner: str, *, won: bool) -> None:
        """The wait that `_prepare_wait` returned `owner` to ended, with a holding of
        that owner (`won`) or not: forget it, and if not won, undo what was prepared."""

    def _lease_started(self, owner: str) -> float | None:
        """When (monotonic) the lease an attempt of `owner` just won on started, if that
        was before the attempt (a lease prepared for a wait and not refreshed since):
        the holding's TTL counts from there, so it never claims more than the server
        gives. None by default: the lease starts with the attempt."""
        return None

    # -- the waiting acquisition ---------------------------------------------------------

    def _acquire_waiting(
        self, name: str, ttl_seconds: float, seconds: float, *, fenced: bool
    ) -> Holding | None:
        """`acquire` with `wait=seconds` (> 0, possibly infinite); name and TTL checked."""
        deadline = time.monotonic() + seconds
        with self._waiters.turn(name, deadline) as waiter:
            if waiter is None:
                return None
            with self._release_signal(name, waiter.event.set), self._waiting_turn(name):
                prepared: list[str] = []
                try:
                    return self._attempts_in_turn(
                        name, ttl_seconds, deadline, waiter, prepared=prepared, fenced=fenced
                    )
                finally:
                    holding = self._ledger.current(name)
                    for owner in prepared:
                        won = holding is not None and holding.owner == owner
                        self._end_wait(name, owner, won=won)

    def _attempts_in_turn(
        self,
        name: str,
        ttl_seconds: float,
        deadline: float,
        waiter: Any,
        *,
        prepared: list[str],
        fenced: bool,
    ) -> Holding | None:
        """The attempts of a waiter whose turn came, until one wins or `deadline` passes;
        the owner token `_prepare_wait` gave, if any, is put in `prepared`."""
        backoff = Backoff()
        while True:
            reservation = self._ledger.reserve(name, ttl_seconds, prepared[0] if prepared else None)
            if reservation is None:
                # This instance holds (or is taking) the name: wait for it here.
                until = min(deadline, time.monotonic() + LOCAL_RECHECK_SECONDS)
                holding = self._ledger.current(name)
                if holding is not None and holding.expires_at < until:
                    until = holding.expires_at
                if not sleep_until_woken(waiter, until) and until >= deadline:
                    return None
                continue
            remaining = deadline - time.monotonic()
            within = min(remaining, 3600.0) if self.waits_on_server else 0.0
            holding = self._acquire_reserved(
                reservation, fenced, within, in_turn=self.queues_waiters
            )
            if holding is not None:
                return holding
            if deadline - time.monotonic() <= 0:
                return None
            if not self.waits_on_server:
                if not prepared:
                    self._prepare_for_next(name, ttl_seconds, prepared)
                pause = self._pause_after_loss(name, backoff)
                sleep_until_woken(waiter, min(deadline, time.monotonic() + max(pause, 0.0)))

    def _prepare_for_next(self, name: str, ttl_seconds: float, prepared: list[str]) -> None:
        """Ask the backend to prepare the wait's next attempts (`_prepare_wait`)."""
        try:
            owner = self._prepare_wait(name, ttl_seconds)
        except ConfigurationError:
            raise
        except self.driver_errors as err:
            raise self._backend_error("acquiring", name, err) from err
        if owner is not None:
            prepared.append(owner)

    def _acquire_reserved(
        self, reservation: Reservation, fenced: bool, within: float, *, in_turn: bool = False
    ) -> Holding | None:
        """One attempt for `reservation`: waiting on the server up to `within` seconds
        (`_acquire_within`) when > 0, in the waiter's place on the server
        (`_acquire_in_turn`) when `in_turn`, else the backend's single round trip."""
        won = False
        name, owner, ttl = reservation.name, reservation.owner, reservation.ttl_seconds
        try:
            try:
                answer: int | bool | None
                if within > 0:
                    answer = self._acquire_within(name, owner, ttl, within, fenced=fenced)
                elif in_turn:
                    answer = self._acquire_in_turn(name, owner, ttl, fenced=fenced)
                elif fenced:
                    answer = self._acquire_fenced(name, owner, ttl)
                else:
                    answer = self._acquire(name, owner, ttl)
                fence = answer if fenced and isinstance(answer, int) else None
                won = answer is not None if fenced else bool(answer)
            except ConfigurationError:
                raise
            except self.driver_errors as err:
                raise self._backend_error("acquiring", name, err) from err
            except BaseException:
                if not self.session_scoped:  # sessions undo their own (`_run`'s `undo`)
                    self._undo_interrupted(name, owner)
                raise
            if not won:
                return None
            started = self._lease_started(owner)
            if started is not None and started < reservation.started:
                reservation = dataclasses.replace(reservation, started=started)
            return self._ledger.record(reservation, fence)
        finally:
            if not won:
                self._ledger.abandon(reservation)

    def _undo_interrupted(self, name: str, owner: str) -> None:
        """An attempt was cancelled or interrupted mid-round-trip: it may have won a lease
        that no holding owns. Release it by its owner token (a no-op if it lost), so the
        name is free now rather than at the TTL."""
        self._release_quietly(name, owner)

    def _release_quietly(self, name: str, owner: str) -> None:
        try:
            self._release(name, owner)
        except Exception as err:  # noqa: BLE001 - the lease expires anyway; say so
            logger.warning(
                "%s lock %r: undoing an interrupted acquisition failed (%s); it expires "
                "with its TTL",
                self.backend_name,
                name,
                self._describe(err),
            )
