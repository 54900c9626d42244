# Generated from session_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`SessionLock`: shared machinery of backends whose locks live in a server session.

PostgreSQL advisory locks and MySQL `GET_LOCK` belong to the connection that took
them: they vanish when it closes, and they are re-entrant within it. So such a
backend keeps a small pool of dedicated connections (never an application's pool,
which would hand a session to someone else) for as long as the instance lives,
each session used by one statement at a time under its own mutex:

* A claim, a fence, a sweep or an acquisition takes any free session (the first
  free one, so a quiet node opens one connection and a busy one up to `pool_size`);
  when every session is busy it waits, at most `pool_timeout_seconds`, and then
  fails with `PoolExhaustedError` (a `LockBackendError` for the caller), never
  opening another connection. A session's mutex is a plain lock, not a first-come
  one (`FairSemaphore`): handing it to the oldest waiter on every release forces a
  thread switch per statement, and in one loaded-machine run of the PostgreSQL fleet
  benchmark (100 tasks x 2 nodes) it missed more fires than the plain lock; the 30 s
  bound is far above the waits a plain lock's unfairness causes.
* A held lock stays on the session that took it: its keep-alive check and its
  release go to that session, so a slow statement on one session never stalls the
  keep-alives of the locks on the others.

Failures are isolated, per session:

* Only a real disconnect ends a session (`_alive` says whether the connection
  survived an error). Then every holding of THAT session is marked lost, the
  session's generation moves on, and its next use reconnects; the other sessions
  and their holdings are untouched. A holding of an ended session is never released
  or renewed on the newer one, which could hold a newer holding of the same name.
* Any other error (a statement timeout, "out of shared memory" when the server's
  lock table is full, a refused statement) fails that call alone with
  `LockBackendError`; every other holding stays held. Session locks are not
  transactional, so a failed acquisition may still have taken the server lock: its
  name is queued for unlocking on its session, and the queue is flushed before that
  session's next statement, so the re-entrant server lock can never be taken twice
  and never leaks.
* A release that fails, or finds its session busy past the pool timeout, is queued
  the same way.

Fire claims are not session locks here (they would die with the process): a
subclass implements `_server_claim` as a row with an expiry on the server's clock.

A subclass supplies the connection and the statements; re-entrancy is already
refused by the holding ledger before a statement is sent.

The machinery is written in layers, one idea each: the pool and the running of a
statement (`locks.session_pool_async`), the checks and releases answered together
(`locks.session_asks_async`), the waits in the server's queue
(`locks.session_waits_async`), and here the hooks a backend implements, its
acquisitions and its fire claims.

Written once, for asyncio, in `locks/session_async.py`; the synchronous flavour in
`locks/session.py` is generated from it by `tools/async_to_sync.py`. In asyncio, `_run`
finishes a statement even when its caller is cancelled; a thread has no such thing.
"""

from __future__ import annotations

import logging
import time
from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Generic

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.session_pool import ConnectionT, PooledSession
from firefly_scheduling.locks.session_waits import SessionWaits

logger = logging.getLogger("firefly_scheduling.locks")


class SessionLock(SessionWaits[ConnectionT], Generic[ConnectionT]):
    """A lock held by a pool of dedicated server sessions; the TTL is accepted and ignored."""

    ttl_honoured = False
    session_scoped = True
    renewable = True
    #: Seconds between two sweeps of expired claim rows (one statement each).
    claim_sweep_seconds: ClassVar[float] = 60.0

    # -- hooks ------------------------------------------------------------------

    @abstractmethod
    def _server_acquire(self, connection: ConnectionT, name: str) -> bool:
        """Try the server lock for `name` without waiting."""

    @abstractmethod
    def _server_claim(self, connection: ConnectionT, name: str, seconds: float) -> bool:
        """Insert the claim row of `name`, expiring `seconds` from now by the server's clock.

        True when inserted (or when it replaced an expired row); False when a live
        row exists. One statement.
        """

    @abstractmethod
    def _server_sweep_claims(self, connection: ConnectionT) -> int:
        """Delete claim rows that expired; return how many."""

    def _server_acquire_fenced(self, connection: ConnectionT, name: str) -> int | None:
        """Take the server lock and return the next fencing token; override for one trip."""
        if not self._server_acquire(connection, name):
            return None
        return self._server_fence(connection, name)

    def _server_acquire_many(
        self, connection: ConnectionT, names: Sequence[str], *, fenced: bool
    ) -> dict[str, int | bool]:
        """The distinct `names` won on this session: each one's fencing token, or True.

        One statement each here; a backend that takes them in one statement overrides
        it and sets `batch_acquires`.
        """
        won: dict[str, int | bool] = {}
        for name in names:
            if fenced:
                token = self._server_acquire_fenced(connection, name)
                if token is not None:
                    won[name] = token
            elif self._server_acquire(connection, name):
                won[name] = True
        return won

    # -- BaseLock hooks -----------------------------------------------------------

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        with self._any_session() as session:
            won = self._run(
                session, lambda connection: self._server_acquire(connection, name), undo=(name,)
            )
            if won:
                self._hold(session, owner)
            return won

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        with self._any_session() as session:
            token = self._run(
                session,
                lambda connection: self._server_acquire_fenced(connection, name),
                undo=(name,),
            )
            if token is not None:
                self._hold(session, owner)
            return token

    def _acquire_many(
        self, requests: Sequence[tuple[str, str, float]], *, fenced: bool
    ) -> list[int | bool | BaseException | None]:
        """Every acquisition on one session, which then holds every lock won.

        A failed statement may have taken some of the server locks: each name is
        queued for unlocking on the session, as a single acquisition's is.
        """
        if not requests:
            return []
        names = tuple(name for name, _, _ in requests)
        with self._any_session() as session:
            won = self._run(
                session,
                lambda connection: self._server_acquire_many(connection, names, fenced=fenced),
                undo=names,
            )
            answers: list[int | bool | BaseException | None] = []
            for name, owner, _ in requests:
                answer = won.get(name)
                if answer is not None:
                    self._hold(session, owner)
                answers.append(answer if fenced else answer is not None)
            return answers

    def _fence(self, name: str) -> int:
        with self._any_session() as session:
            return self._run(session, lambda connection: self._server_fence(connection, name))

    def _claim(self, name: str, seconds: float) -> bool:
        [answer] = self._claim_many([(name, seconds)])
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | BaseException]:
        """Insert the claim rows; a retry that finds a name claimed is an unknown outcome.

        A claim row outlives its session, so resending it is not idempotent: when the
        first attempt's session died after the server committed the row (the reply was
        lost), the retry meets that very row. Reporting it as claimed elsewhere would
        make every node pass the fire over unrecorded; the caller records the error.
        """
        attempts = 0

        def claim_once(connection: ConnectionT) -> list[bool | BaseException]:
            nonlocal attempts
            attempts += 1
            if len(claims) == 1:
                [(name, seconds)] = claims
                won = [self._server_claim(connection, name, seconds)]
            else:
                won = self._server_claim_many(connection, claims)
            if attempts == 1:
                return list(won)
            return [
                True if taken else self._unknown_claim(name)
                for (name, _), taken in zip(claims, won, strict=True)
            ]

        with self._any_session() as session:
            answers = self._run(session, claim_once)
            self._sweep_when_due(session)
            return answers

    def _server_claim_many(
        self, connection: ConnectionT, claims: Sequence[tuple[str, float]]
    ) -> list[bool]:
        """Each claim's row inserted (True) or found; one statement each unless overridden."""
        return [self._server_claim(connection, name, seconds) for name, seconds in claims]

    def _unknown_claim(self, name: str) -> LockBackendError:
        return LockBackendError(
            f"{self.backend_name} lock backend {self._target}: the claim of {name!r} "
            "has an unknown outcome: its first attempt ended with its session, and the "
            "retry found it claimed, by that attempt (whose reply was lost) or by "
            "another node"
        )

    def _sweep_when_due(self, session: PooledSession[ConnectionT]) -> None:
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.claim_sweep_seconds
        try:
            self._run(session, self._server_sweep_claims, retry=False)
        except self.driver_errors as err:  # the next sweep tries again
            logger.warning(
                "%s lock: sweeping expired fire claims failed (%s)",
                self.backend_name,
                self._describe(err),
            )
