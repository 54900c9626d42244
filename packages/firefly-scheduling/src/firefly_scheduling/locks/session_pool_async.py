"""`AsyncSessionPool`: the dedicated server sessions of a session lock, and how a
statement runs on one of them with its failures isolated.

The bottom of `AsyncSessionLock` (`locks.session_async`, whose module doc tells the
whole story). A lock instance keeps up to `pool_size` dedicated connections, each
used by one statement at a time under its own mutex (`PooledSession`):

* `_any_session` lends the first free session that no check or release waits for
  (they can use no other: a thread's mutex is not handed to the oldest waiter, and
  back-to-back waiting slices would starve them), else the first free one, sending
  its waiting asks first, else waits in turn for one, at most
  `pool_timeout_seconds`, then fails with `PoolExhaustedError`; it never opens a
  connection beyond the pool.
* `_run` sends a statement on a session: only a real disconnect (`_alive`) ends the
  session, marks ITS holdings lost and moves its generation on; any other error
  fails that call alone. Server locks a failed or cancelled statement may have taken
  are queued for unlocking (`undo`) and released before the session's next statement.

Written once, for asyncio; `locks/session_pool.py` is generated from it by
`tools/async_to_sync.py`. In asyncio, `_run` finishes a statement even when its
caller is cancelled; a thread has no such thing.
"""

# async-to-sync: rename _attempts _run
# async-to-sync: rename AsyncSessionPool SessionPool

from __future__ import annotations

import asyncio  # sync: import threading
import contextlib  # sync: drop
import logging
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from firefly_scheduling.concurrency.connection_budget import POOL_TIMEOUT_SECONDS, URL_PARAMETER
from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.concurrency.forks import reset_in_forked_child
from firefly_scheduling.concurrency.pool_size import PoolExhaustedError
from firefly_scheduling.locks.base_async import AsyncBaseLock

logger = logging.getLogger("firefly_scheduling.locks")

ConnectionT = TypeVar("ConnectionT")
_R = TypeVar("_R")

if ASYNC:  # noqa: SIM108 - the generated twin keeps the `else:` branch alone
    #: A statement run on the session: takes the connection, returns the result.
    Statement = Callable[[ConnectionT], Awaitable[_R]]
else:
    #: A statement run on the session: takes the connection, returns the result.
    Statement = Callable[[ConnectionT], _R]


#: An ask's key: the holding's owner token, and whether it is a release (else a check).
AskKey = tuple[str, bool]


@dataclass(frozen=True, slots=True)
class Ask:
    """A keep-alive check or a release of one holding, waiting for its session
    (`locks.session_asks_async` sends the waiting asks of a session together)."""

    name: str
    generation: int


class PooledSession(Generic[ConnectionT]):
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
        self.mutex = asyncio.Lock()
        # Bumped whenever the session ends: its holdings of older generations are gone.
        self.generation = 0
        # Owner tokens whose server lock lives in this session.
        self.owners: set[str] = set()
        # Server locks this session may hold although no holding owns them.
        self.pending_unlocks: list[str] = []
        # Checks and releases waiting for the session, answered together (`_Ask`).
        self.asks: dict[AskKey, Ask] = {}
        # The answers to asks that another caller's batch sent, until their callers read them.
        self.answers: dict[AskKey, bool] = {}

    @property
    def awaited(self) -> bool:
        """Whether a check or a release waits for this session, or for its answer."""
        return bool(self.asks or self.answers)

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


class AsyncSessionPool(AsyncBaseLock, Generic[ConnectionT]):
    """The sessions of one lock instance and the running of statements on them."""

    #: Longest a caller waits for a session of a busy pool.
    pool_timeout_seconds: ClassVar[float] = POOL_TIMEOUT_SECONDS
    if ASYNC:
        #: Whether the driver keeps its connection usable when a statement is cancelled
        #: mid-reply (psycopg cancels the query on the server and reads its end). When it
        #: does not (asyncmy closes the connection), each statement runs in a task of its
        #: own that a cancelled caller waits for: a task per statement, the price of not
        #: ending the session. Either way an acquisition that a cancelled caller may have
        #: won is released before the cancellation goes on. See `_run`.
        cancel_safe_driver: ClassVar[bool] = False

    def __init__(self, *, target: str, secrets: tuple[str, ...] = (), pool_size: int = 1) -> None:
        super().__init__(target=target, secrets=secrets)
        if pool_size < 1:
            raise ValueError(f"a session pool needs at least one session, got {pool_size!r}")
        self._pool_size = pool_size
        self._sessions: list[PooledSession[ConnectionT]] = [
            PooledSession(i) for i in range(pool_size)
        ]
        # Owner token -> the session whose server lock it holds.
        self._owner_sessions: dict[str, PooledSession[ConnectionT]] = {}
        self._rotation = 0
        self._next_sweep = 0.0
        reset_in_forked_child(self, AsyncSessionPool._after_fork_in_child)

    @property
    def pool_size(self) -> int:
        """The most sessions (server connections) this instance opens at once."""
        return self._pool_size

    def _session_of(self, name: str) -> PooledSession[ConnectionT] | None:
        """The session holding `name` now, if any (tests, diagnostics)."""
        holding = self._ledger.current(name)
        return None if holding is None else self._owner_sessions.get(holding.owner)

    def _connection_of(self, name: str) -> ConnectionT | None:
        """The connection of the session holding `name` now, if any (tests, diagnostics)."""
        session = self._session_of(name)
        return None if session is None else session.connection

    # -- hooks ------------------------------------------------------------------

    @abstractmethod
    async def _connect(self) -> ConnectionT:
        """Open one dedicated connection (autocommit, bounded connect timeout)."""

    @abstractmethod
    async def _disconnect(self, connection: ConnectionT) -> None:
        """Close `connection`, ignoring errors: it may already be dead."""

    @abstractmethod
    def _alive(self, connection: ConnectionT) -> bool:
        """Whether `connection` is still usable after one of its statements failed."""

    @abstractmethod
    async def _server_release(self, connection: ConnectionT, name: str) -> bool:
        """Release the server lock; False if this session did not hold it."""

    async def _close(self) -> None:
        for session in self._sessions:
            await session.mutex.acquire()
            try:
                await self._drop_session(session)
            finally:
                session.mutex.release()

    # -- the pool -----------------------------------------------------------------

    @asynccontextmanager
    async def _any_session(self) -> AsyncIterator[PooledSession[ConnectionT]]:
        """A free session, its mutex held: the first free one no check or release waits
        for, else the first free one, else wait for one in turn; the asks waiting for it
        are sent first."""
        chosen = await self._first_free(awaited=False)
        if chosen is None:
            chosen = await self._first_free(awaited=True)
        if chosen is None:
            self._rotation = (self._rotation + 1) % self._pool_size
            chosen = self._sessions[self._rotation]
            await self._take(chosen.mutex)
        try:
            if chosen.asks:
                await self._serve_asks(chosen)
            yield chosen
        finally:
            chosen.mutex.release()

    async def _first_free(self, *, awaited: bool) -> PooledSession[ConnectionT] | None:
        """The first free session, its mutex taken; `awaited`: even one a check or a
        release waits for (else such a session is passed over)."""
        for session in self._sessions:
            if (awaited or not session.awaited) and await self._try_take(session.mutex):
                return session
        return None

    async def _serve_asks(self, session: PooledSession[ConnectionT]) -> None:
        """Send the checks and releases waiting for `session` (its mutex held); the
        layer that keeps asks (`locks.session_asks_async`) implements it."""

    async def _try_take(self, mutex: asyncio.Lock) -> bool:
        """Take `mutex` if it is free; False at once when it is not."""
        # asyncio: an unlocked lock is taken at once, unless coroutines queue for it.
        if mutex.locked():  # sync: return mutex.acquire(blocking=False)
            return False  # sync: drop
        await self._take(mutex)  # sync: drop
        return True  # sync: drop

    async def _take(self, mutex: asyncio.Lock) -> None:
        """Acquire a session's mutex, waiting at most `pool_timeout_seconds`."""
        seconds = self.pool_timeout_seconds
        if ASYNC:
            try:
                async with asyncio.timeout(seconds):
                    await mutex.acquire()
            except TimeoutError:
                taken = False
            else:
                taken = True
        else:
            taken = mutex.acquire(timeout=seconds)
        if not taken:
            raise PoolExhaustedError(self._pool_size, seconds, setting=URL_PARAMETER)

    def _hold(self, session: PooledSession[ConnectionT], owner: str) -> None:
        """Record that `owner`'s server lock lives in `session` (its mutex held)."""
        session.owners.add(owner)
        self._owner_sessions[owner] = session

    def _after_fork_in_child(self) -> None:
        """After a fork (gunicorn --preload, multiprocessing), no session is the child's.

        Closing one would end the parent's session and free the parent's locks, so the
        child drops them without closing, with fresh mutexes (a parent thread may have
        held one at the fork); the ledger forgets the parent's holdings by itself.
        """
        self._sessions = [PooledSession(index) for index in range(self._pool_size)]
        self._owner_sessions = {}

    # -- machinery ----------------------------------------------------------------

    if ASYNC:

        async def _run(
            self,
            session: PooledSession[ConnectionT],
            statement: Statement[ConnectionT, _R],
            *,
            undo: Sequence[str] = (),
            retry: bool = True,
        ) -> _R:
            """`_attempts`, with what a cancelled caller leaves behind put right.

            A cancelled statement must not end the session (`_to_completion`), and an
            acquisition that may have won for a caller who is gone must not keep the
            server lock, which no holding owns (`undo`).
            """
            work = self._attempts(session, statement, undo=undo, retry=retry)
            if not self.cancel_safe_driver:
                return await self._to_completion(session, work, undo)
            try:
                return await work
            except asyncio.CancelledError:
                # The driver read the statement's end; whether it won is unknown, and
                # releasing a lock the session does not hold is harmless.
                if undo:
                    await self._undo_for_cancelled(session, undo)
                raise

        async def _to_completion(
            self, session: PooledSession[ConnectionT], work: Awaitable[_R], undo: Sequence[str]
        ) -> _R:
            """Finish `work` (statements on the session) even when the caller is cancelled.

            A statement cancelled mid-reply leaves the driver between two packets, and
            asyncmy then closes the connection, which ends the session and frees every
            lock it holds. So the round trip always completes, under the session's mutex
            the caller holds; an acquisition that won for a caller who is gone is
            released at once (`undo`), and only then does the cancellation go on.
            """
            task = asyncio.ensure_future(work)
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                await _completion(task)
                # `_won` reads the task's outcome, so its failure is never left unread.
                if _won(task) and undo:
                    await self._undo_for_cancelled(session, undo)
                raise

        async def _undo_for_cancelled(
            self, session: PooledSession[ConnectionT], names: Sequence[str]
        ) -> None:
            """Release `names` now, for a cancelled caller; else before the next statement."""
            for name in names:
                session.queue_unlock(name)
            if session.connection is not None:
                flush = self._flush_unlocks_quietly(session, session.connection)
                await _completion(asyncio.ensure_future(flush))

    async def _attempts(
        self,
        session: PooledSession[ConnectionT],
        statement: Statement[ConnectionT, _R],
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
            return await self._on_session(session, statement, undo)
        except self.driver_errors:
            if not (retry and idle and session.connection is None):
                raise
        return await self._on_session(session, statement, undo)

    async def _on_session(
        self,
        session: PooledSession[ConnectionT],
        statement: Statement[ConnectionT, _R],
        undo: Sequence[str],
    ) -> _R:
        connection = await self._connected(session)
        try:
            return await statement(connection)
        except self.driver_errors:
            if not self._alive(connection):
                await self._session_lost(session)
            elif undo:
                for name in undo:
                    session.queue_unlock(name)
                await self._flush_unlocks_quietly(session, connection)
            raise

    async def _connected(self, session: PooledSession[ConnectionT]) -> ConnectionT:
        """The session's live connection, opened on demand, queued unlocks flushed first."""
        if session.connection is None:
            session.connection = await self._connect()
        connection = session.connection
        if session.pending_unlocks:
            await self._flush_unlocks(session, connection)
        return connection

    async def _flush_unlocks(
        self, session: PooledSession[ConnectionT], connection: ConnectionT
    ) -> None:
        """Release every queued server lock; raises (and keeps the rest queued) on failure."""
        while session.pending_unlocks:
            name = session.pending_unlocks[0]
            try:
                await self._server_release(connection, name)
            except self.driver_errors:
                if not self._alive(connection):
                    await self._session_lost(session)
                raise
            session.pending_unlocks.pop(0)

    async def _flush_unlocks_quietly(
        self, session: PooledSession[ConnectionT], connection: ConnectionT
    ) -> None:
        try:
            await self._flush_unlocks(session, connection)
        except self.driver_errors as err:
            logger.warning(
                "%s lock: undoing a failed acquisition failed too (%s); retried before the "
                "next statement",
                self.backend_name,
                self._describe(err),
            )

    async def _drop_session(self, session: PooledSession[ConnectionT]) -> set[str]:
        """Disconnect `session`, then forget it; return the owners it carried."""
        if session.connection is not None:
            await self._disconnect(session.connection)
        owners = session.forget()
        for owner in owners:
            self._owner_sessions.pop(owner, None)
        return owners

    async def _session_lost(self, session: PooledSession[ConnectionT]) -> None:
        """Drop the dead connection and mark every holding of THAT session as lost."""
        owners = await self._drop_session(session)
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


if ASYNC:

    async def _completion(task: asyncio.Future[Any]) -> None:
        """Wait until `task` is done, whatever cancellations reach the waiter meanwhile."""
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)

    def _won(task: asyncio.Future[Any]) -> bool:
        """Whether the finished acquisition `task` took its lock (a truthy result)."""
        return not task.cancelled() and task.exception() is None and bool(task.result())
