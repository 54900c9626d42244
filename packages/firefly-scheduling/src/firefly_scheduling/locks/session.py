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

Written once, for asyncio, in `locks/session_async.py`; the synchronous flavour in
`locks/session.py` is generated from it by `tools/async_to_sync.py`. In asyncio, `_run`
finishes a statement even when its caller is cancelled; a thread has no such thing.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from firefly_scheduling.concurrency.connection_budget import POOL_TIMEOUT_SECONDS, URL_PARAMETER
from firefly_scheduling.concurrency.forks import reset_in_forked_child
from firefly_scheduling.concurrency.pool_size import PoolExhaustedError
from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks.base import BaseLock

logger = logging.getLogger("firefly_scheduling.locks")

ConnectionT = TypeVar("ConnectionT")
_R = TypeVar("_R")

#: A statement run on the session: takes the connection, returns the result.
_Statement = Callable[[ConnectionT], _R]
#: Sends one statement for some names; one answer per name.
_SendNames = Callable[[Sequence[str]], list[bool]]


#: An ask's key: the holding's owner token, and whether it is a release (else a check).
_AskKey = tuple[str, bool]
#: Names per statement when a batch of checks or releases is sent (a SELECT list).
ASKS_PER_STATEMENT = 500


@dataclass(frozen=True, slots=True)
class _Ask:
    """A keep-alive check or a release of one holding, waiting for its session.

    The session runs one statement at a time, so the checks before the bodies of an
    instant's fires (a batch took their locks on one session) and their releases
    after queued behind each other, one round trip each. Whoever takes the mutex
    next sends every ask waiting then, one statement for the checks and one for the
    releases, and leaves each waiter its own answer from the server: each lock is
    still checked and released by name, only in company (issue 12).
    """

    name: str
    generation: int


class _Session(Generic[ConnectionT]):
    """One session of the pool: its connection, its mutex and the holdings it carries."""

    __slots__ = (
        "answers",
        "asks",
        "connection",
        "generation",
        "index",
        "mutex",
        "owners",
        "pending_unlocks",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.connection: ConnectionT | None = None
        self.mutex = threading.Lock()
        # Bumped whenever the session ends: its holdings of older generations are gone.
        self.generation = 0
        # Owner tokens whose server lock lives in this session.
        self.owners: set[str] = set()
        # Server locks this session may hold although no holding owns them.
        self.pending_unlocks: list[str] = []
        # Checks and releases waiting for the session, answered together (`_Ask`).
        self.asks: dict[_AskKey, _Ask] = {}
        # The answers to asks that another caller's batch sent, until their callers read them.
        self.answers: dict[_AskKey, bool] = {}

    def queue_unlock(self, name: str) -> None:
        if name not in self.pending_unlocks:
            self.pending_unlocks.append(name)

    def forget(self) -> set[str]:
        """No connection, a new generation, no pending unlocks; return its owners."""
        owners, self.owners = self.owners, set()
        self.connection = None
        self.generation += 1
        self.pending_unlocks.clear()
        self.answers.clear()
        return owners


class SessionLock(BaseLock, Generic[ConnectionT]):
    """A lock held by a pool of dedicated server sessions; the TTL is accepted and ignored."""

    ttl_honoured = False
    session_scoped = True
    renewable = True
    #: Seconds between two sweeps of expired claim rows (one statement each).
    claim_sweep_seconds: ClassVar[float] = 60.0
    #: Longest a caller waits for a session of a busy pool.
    pool_timeout_seconds: ClassVar[float] = POOL_TIMEOUT_SECONDS

    def __init__(self, *, target: str, secrets: tuple[str, ...] = (), pool_size: int = 1) -> None:
        super().__init__(target=target, secrets=secrets)
        if pool_size < 1:
            raise ValueError(f"a session pool needs at least one session, got {pool_size!r}")
        self._pool_size = pool_size
        self._sessions: list[_Session[ConnectionT]] = [_Session(i) for i in range(pool_size)]
        # Owner token -> the session whose server lock it holds.
        self._owner_sessions: dict[str, _Session[ConnectionT]] = {}
        self._rotation = 0
        self._next_sweep = 0.0
        reset_in_forked_child(self, SessionLock._after_fork_in_child)

    @property
    def pool_size(self) -> int:
        """The most sessions (server connections) this instance opens at once."""
        return self._pool_size

    def _session_of(self, name: str) -> _Session[ConnectionT] | None:
        """The session holding `name` now, if any (tests, diagnostics)."""
        holding = self._ledger.current(name)
        return None if holding is None else self._owner_sessions.get(holding.owner)

    def _connection_of(self, name: str) -> ConnectionT | None:
        """The connection of the session holding `name` now, if any (tests, diagnostics)."""
        session = self._session_of(name)
        return None if session is None else session.connection

    # -- hooks ------------------------------------------------------------------

    @abstractmethod
    def _connect(self) -> ConnectionT:
        """Open one dedicated connection (autocommit, bounded connect timeout)."""

    @abstractmethod
    def _disconnect(self, connection: ConnectionT) -> None:
        """Close `connection`, ignoring errors: it may already be dead."""

    @abstractmethod
    def _alive(self, connection: ConnectionT) -> bool:
        """Whether `connection` is still usable after one of its statements failed."""

    @abstractmethod
    def _server_acquire(self, connection: ConnectionT, name: str) -> bool:
        """Try the server lock for `name` without waiting."""

    @abstractmethod
    def _server_release(self, connection: ConnectionT, name: str) -> bool:
        """Release the server lock; False if this session did not hold it."""

    @abstractmethod
    def _server_holds(self, connection: ConnectionT, name: str) -> bool:
        """Whether this session still holds the server lock for `name`."""

    @abstractmethod
    def _server_claim(self, connection: ConnectionT, name: str, seconds: float) -> bool:
        """Insert the claim row of `name`, expiring `seconds` from now by the server's clock.

        True when inserted (or when it replaced an expired row); False when a live
        row exists. One statement.
        """

    @abstractmethod
    def _server_sweep_claims(self, connection: ConnectionT) -> int:
        """Delete claim rows that expired; return how many."""

    def _server_fence(self, connection: ConnectionT, name: str) -> int:
        """Increment and return the fencing counter of `name`."""
        raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")

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

    def _release(self, name: str, owner: str) -> bool:
        session = self._owner_sessions.pop(owner, None)
        if session is None:
            return False  # the session died, and the lock with it
        generation = session.generation
        key = (owner, True)
        session.asks[key] = _Ask(name, generation)
        try:
            self._take(session.mutex)
        except PoolExhaustedError as err:
            answer = self._withdraw(session, key)
            if answer is not None:
                return answer
            if session.generation == generation and owner in session.owners:
                session.owners.discard(owner)
                session.queue_unlock(name)
            self._warn_release_queued(name, err)
            return True
        try:
            return self._answer(session, key, _Ask(name, generation))
        finally:
            session.mutex.release()

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        session = self._owner_sessions.get(owner)
        if session is None:
            return False
        generation = session.generation
        key = (owner, False)
        session.asks[key] = _Ask(name, generation)
        try:
            self._take(session.mutex)
        except PoolExhaustedError as err:
            answer = self._withdraw(session, key)
            if answer is not None:
                return answer
            # Busy, not gone: an ended session would have forgotten the owner.
            self._warn_check_failed(name, err)
            return session.generation == generation and owner in session.owners
        try:
            return self._answer(session, key, _Ask(name, generation))
        finally:
            session.mutex.release()

    # -- checks and releases, answered together (`_Ask`) ---------------------------------

    def _withdraw(self, session: _Session[ConnectionT], key: _AskKey) -> bool | None:
        """A caller gives up waiting: its answer if a batch gave one already, else None."""
        session.asks.pop(key, None)
        return session.answers.pop(key, None)

    def _answer(self, session: _Session[ConnectionT], key: _AskKey, ask: _Ask) -> bool:
        """The answer to `ask` (the session's mutex held): a batch's, or our own batch's.

        A batch that failed part-way (a bug, a cancellation) left the asks it took
        without an answer; such an ask is put back and sent in this batch.
        """
        answer = session.answers.pop(key, None)
        if answer is not None:
            session.asks.pop(key, None)
            return answer
        session.asks.setdefault(key, ask)
        self._send_asks(session)
        return session.answers.pop(key)

    def _send_asks(self, session: _Session[ConnectionT]) -> None:
        """Send every waiting ask: the checks in one statement, then the releases in one.

        An ask of a holding the session no longer carries (its session ended, it was
        released) is answered False without a statement. Each answer is left in
        `session.answers` for its caller.
        """
        asks, session.asks = session.asks, {}
        checks: list[tuple[_AskKey, _Ask]] = []
        releases: list[tuple[_AskKey, _Ask]] = []
        for key, ask in asks.items():
            owner, releasing = key
            if owner not in session.owners or session.generation != ask.generation:
                session.answers[key] = False
            else:
                (releases if releasing else checks).append((key, ask))
        if checks:
            self._check_all(session, checks)
        if releases:
            self._release_all(session, releases)

    def _check_all(
        self, session: _Session[ConnectionT], checks: list[tuple[_AskKey, _Ask]]
    ) -> None:
        names = [ask.name for _, ask in checks]
        generation = session.generation
        try:
            held = self._run(
                session,
                lambda connection: self._server_holds_all(connection, names),
                retry=False,
            )
        except self.driver_errors as err:
            ended = session.generation != generation  # and every lock of it
            for key, ask in checks:
                if not ended:
                    # A session lock lives as long as its session, which is still there.
                    self._warn_check_failed(ask.name, err)
                session.answers[key] = not ended
            return
        for (key, _), answer in zip(checks, held, strict=True):
            session.answers[key] = answer

    def _release_all(
        self, session: _Session[ConnectionT], releases: list[tuple[_AskKey, _Ask]]
    ) -> None:
        names = [ask.name for _, ask in releases]
        generation = session.generation
        try:
            released = self._run(
                session,
                lambda connection: self._server_release_all(connection, names),
                retry=False,
            )
        except self.driver_errors as err:
            if session.generation != generation:
                # The session had ended, and the server freed the locks with it while
                # they were held: another node may have run meanwhile. The owners were
                # still the session's, so the session's end marked their holdings lost.
                for key, _ in releases:
                    session.answers[key] = False
                return
            for key, ask in releases:
                session.owners.discard(key[0])
                session.queue_unlock(ask.name)
                self._warn_release_queued(ask.name, err)
                session.answers[key] = True
            return
        for (key, _), answer in zip(releases, released, strict=True):
            session.owners.discard(key[0])
            session.answers[key] = answer

    def _server_holds_all(self, connection: ConnectionT, names: Sequence[str]) -> list[bool]:
        """`_server_holds` of each name: one statement per `ASKS_PER_STATEMENT` names."""
        if len(names) == 1:
            return [self._server_holds(connection, names[0])]
        return _in_chunks(names, lambda chunk: self._server_holds_many(connection, chunk))

    def _server_release_all(self, connection: ConnectionT, names: Sequence[str]) -> list[bool]:
        """`_server_release` of each name: one statement per `ASKS_PER_STATEMENT` names."""
        if len(names) == 1:
            return [self._server_release(connection, names[0])]
        return _in_chunks(names, lambda chunk: self._server_release_many(connection, chunk))

    def _server_holds_many(self, connection: ConnectionT, names: Sequence[str]) -> list[bool]:
        """`_server_holds` of each of the distinct `names`; one statement each unless
        overridden."""
        return [self._server_holds(connection, name) for name in names]

    def _server_release_many(self, connection: ConnectionT, names: Sequence[str]) -> list[bool]:
        """`_server_release` of each of the distinct `names`, in order; one statement
        each unless overridden."""
        return [self._server_release(connection, name) for name in names]

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

    def _close(self) -> None:
        for session in self._sessions:
            session.mutex.acquire()
            try:
                self._drop_session(session)
            finally:
                session.mutex.release()

    # -- the pool -----------------------------------------------------------------

    @contextmanager
    def _any_session(self) -> Iterator[_Session[ConnectionT]]:
        """A free session, its mutex held: the first free one, else wait for one in turn."""
        chosen: _Session[ConnectionT] | None = None
        for session in self._sessions:
            if self._try_take(session.mutex):
                chosen = session
                break
        if chosen is None:
            self._rotation = (self._rotation + 1) % self._pool_size
            chosen = self._sessions[self._rotation]
            self._take(chosen.mutex)
        try:
            yield chosen
        finally:
            chosen.mutex.release()

    def _try_take(self, mutex: threading.Lock) -> bool:
        """Take `mutex` if it is free; False at once when it is not."""
        # asyncio: an unlocked lock is taken at once, unless coroutines queue for it.
        return mutex.acquire(blocking=False)

    def _take(self, mutex: threading.Lock) -> None:
        """Acquire a session's mutex, waiting at most `pool_timeout_seconds`."""
        seconds = self.pool_timeout_seconds
        taken = mutex.acquire(timeout=seconds)
        if not taken:
            raise PoolExhaustedError(self._pool_size, seconds, setting=URL_PARAMETER)

    def _hold(self, session: _Session[ConnectionT], owner: str) -> None:
        """Record that `owner`'s server lock lives in `session` (its mutex held)."""
        session.owners.add(owner)
        self._owner_sessions[owner] = session

    def _after_fork_in_child(self) -> None:
        """After a fork (gunicorn --preload, multiprocessing), no session is the child's.

        Closing one would end the parent's session and free the parent's locks, so the
        child drops them without closing, with fresh mutexes (a parent thread may have
        held one at the fork); the ledger forgets the parent's holdings by itself.
        """
        self._sessions = [_Session(index) for index in range(self._pool_size)]
        self._owner_sessions = {}

    # -- machinery ----------------------------------------------------------------

    def _run(
        self,
        session: _Session[ConnectionT],
        statement: _Statement[ConnectionT, _R],
        *,
        undo: Sequence[str] = (),
        retry: bool = True,
    ) -> _R:
        """Run `statement` on `session` (under its mutex).

        `undo`: the server locks the statement may have taken before it failed. With
        `retry`, an idle session (no holding on it) that turns out dead is replaced
        once at once: a server restart or an idle timeout lost no lock, so the call
        should not fail for it.
        """
        idle = session.connection is not None and not session.owners
        try:
            return self._on_session(session, statement, undo)
        except self.driver_errors:
            if not (retry and idle and session.connection is None):
                raise
        return self._on_session(session, statement, undo)

    def _on_session(
        self,
        session: _Session[ConnectionT],
        statement: _Statement[ConnectionT, _R],
        undo: Sequence[str],
    ) -> _R:
        connection = self._connected(session)
        try:
            return statement(connection)
        except self.driver_errors:
            if not self._alive(connection):
                self._session_lost(session)
            elif undo:
                for name in undo:
                    session.queue_unlock(name)
                self._flush_unlocks_quietly(session, connection)
            raise

    def _connected(self, session: _Session[ConnectionT]) -> ConnectionT:
        """The session's live connection, opened on demand, queued unlocks flushed first."""
        if session.connection is None:
            session.connection = self._connect()
        connection = session.connection
        if session.pending_unlocks:
            self._flush_unlocks(session, connection)
        return connection

    def _flush_unlocks(self, session: _Session[ConnectionT], connection: ConnectionT) -> None:
        """Release every queued server lock; raises (and keeps the rest queued) on failure."""
        while session.pending_unlocks:
            name = session.pending_unlocks[0]
            try:
                self._server_release(connection, name)
            except self.driver_errors:
                if not self._alive(connection):
                    self._session_lost(session)
                raise
            session.pending_unlocks.pop(0)

    def _flush_unlocks_quietly(
        self, session: _Session[ConnectionT], connection: ConnectionT
    ) -> None:
        try:
            self._flush_unlocks(session, connection)
        except self.driver_errors as err:
            logger.warning(
                "%s lock: undoing a failed acquisition failed too (%s); retried before the "
                "next statement",
                self.backend_name,
                self._describe(err),
            )

    def _sweep_when_due(self, session: _Session[ConnectionT]) -> None:
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

    def _drop_session(self, session: _Session[ConnectionT]) -> set[str]:
        """Disconnect `session`, then forget it; return the owners it carried."""
        if session.connection is not None:
            self._disconnect(session.connection)
        owners = session.forget()
        for owner in owners:
            self._owner_sessions.pop(owner, None)
        return owners

    def _session_lost(self, session: _Session[ConnectionT]) -> None:
        """Drop the dead connection and mark every holding of THAT session as lost."""
        owners = self._drop_session(session)
        ended = [holding for holding in self._ledger.holdings() if holding.owner in owners]
        for holding in self._ledger.mark_lost(ended):
            logger.error(
                "%s lock %r is lost: its session %s (pool session %d) ended",
                self.backend_name,
                holding.name,
                self._target,
                session.index,
            )

    def _warn_release_queued(self, name: str, err: BaseException) -> None:
        logger.warning(
            "%s lock %r: release failed (%s); it stays held by its session until it is "
            "released before that session's next statement",
            self.backend_name,
            name,
            self._describe(err),
        )

    def _warn_check_failed(self, name: str, err: BaseException) -> None:
        logger.warning(
            "%s lock %r: checking the session's hold failed (%s); the session is alive, so "
            "it still holds the lock",
            self.backend_name,
            name,
            self._describe(err),
        )


def _in_chunks(names: Sequence[str], send: _SendNames) -> list[bool]:
    """`send` of each `ASKS_PER_STATEMENT` names in turn, their answers in order."""
    answers: list[bool] = []
    for start in range(0, len(names), ASKS_PER_STATEMENT):
        answers.extend(send(names[start : start + ASKS_PER_STATEMENT]))
    return answers
