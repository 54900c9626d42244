"""`AsyncSessionLock`: shared machinery of backends whose locks live in a server session.

PostgreSQL advisory locks and MySQL `GET_LOCK` belong to the connection that took
them: they vanish when it closes, and they are re-entrant within it. So such a
backend keeps one dedicated connection (never a pooled one, which would hand the
session to someone else) for as long as the instance lives, and serialises its use
with a mutex.

Failures are isolated:

* Only a real disconnect ends the session (`_alive` says whether the connection
  survived an error). Then every holding of that session is marked lost, the
  session's generation moves on, and the next call reconnects. A holding of an
  ended generation is never released or renewed on a newer session, which could
  hold a newer holding of the same name.
* Any other error (a statement timeout, "out of shared memory" when the server's
  lock table is full, a refused statement) fails that call alone with
  `LockBackendError`; every other holding stays held. Session locks are not
  transactional, so a failed acquisition may still have taken the server lock: its
  name is queued for unlocking, and the queue is flushed before the next statement,
  so the re-entrant server lock can never be taken twice and never leaks.
* A release that fails on a live session is queued the same way.

Fire claims are not session locks here (they would die with the process): a
subclass implements `_server_claim` as a row with an expiry on the server's clock.

A subclass supplies the connection and the statements; re-entrancy is already
refused by the holding ledger before a statement is sent.

Written once, for asyncio, in `aio/session.py`; the synchronous flavour in
`locks/session.py` is generated from it by `tools/async_to_sync.py`. In asyncio, `_run`
finishes a statement even when its caller is cancelled; a thread has no such thing.
"""

# async-to-sync: rename _attempts _run

from __future__ import annotations

import asyncio  # sync: import threading
import contextlib  # sync: drop
import logging
import os
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, TypeVar

from firefly_scheduling.aio.base import AsyncBaseLock
from firefly_scheduling.aio.flavour import ASYNC  # sync: drop
from firefly_scheduling.errors import LockBackendError

logger = logging.getLogger("firefly_scheduling.locks")

ConnectionT = TypeVar("ConnectionT")
_R = TypeVar("_R")

if ASYNC:  # noqa: SIM108 - the generated twin keeps the `else:` branch alone
    #: A statement run on the session: takes the connection, returns the result.
    _Statement = Callable[[ConnectionT], Awaitable[_R]]
else:
    #: A statement run on the session: takes the connection, returns the result.
    _Statement = Callable[[ConnectionT], _R]


class AsyncSessionLock(AsyncBaseLock, Generic[ConnectionT]):
    """A lock held by a dedicated server session; the TTL is accepted and ignored."""

    ttl_honoured = False
    session_scoped = True
    renewable = True
    #: Seconds between two sweeps of expired claim rows (one statement each).
    claim_sweep_seconds: ClassVar[float] = 60.0
    if ASYNC:
        #: Whether the driver keeps its connection usable when a statement is cancelled
        #: mid-reply (psycopg cancels the query on the server and reads its end). When it
        #: does not (asyncmy closes the connection), each statement runs in a task of its
        #: own that a cancelled caller waits for: a task per statement, the price of not
        #: ending the session. Either way an acquisition that a cancelled caller may have
        #: won is released before the cancellation goes on. See `_run`.
        cancel_safe_driver: ClassVar[bool] = False

    def __init__(self, *, target: str, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(target=target, secrets=secrets)
        self._connection: ConnectionT | None = None
        self._connection_pid = os.getpid()
        self._connection_mutex = asyncio.Lock()
        # Bumped whenever the session ends: holdings of older generations are gone.
        self._generation = 0
        self._owner_generation: dict[str, int] = {}
        # Server locks this session may hold although no holding owns them.
        self._pending_unlocks: list[str] = []
        self._next_sweep = 0.0

    # -- hooks ------------------------------------------------------------------

    @abstractmethod
    async def _connect(self) -> ConnectionT:
        """Open the dedicated connection (autocommit, bounded connect timeout)."""

    @abstractmethod
    async def _disconnect(self, connection: ConnectionT) -> None:
        """Close `connection`, ignoring errors: it may already be dead."""

    @abstractmethod
    def _alive(self, connection: ConnectionT) -> bool:
        """Whether `connection` is still usable after one of its statements failed."""

    @abstractmethod
    async def _server_acquire(self, connection: ConnectionT, name: str) -> bool:
        """Try the server lock for `name` without waiting."""

    @abstractmethod
    async def _server_release(self, connection: ConnectionT, name: str) -> bool:
        """Release the server lock; False if this session did not hold it."""

    @abstractmethod
    async def _server_holds(self, connection: ConnectionT, name: str) -> bool:
        """Whether this session still holds the server lock for `name`."""

    @abstractmethod
    async def _server_claim(self, connection: ConnectionT, name: str, seconds: float) -> bool:
        """Insert the claim row of `name`, expiring `seconds` from now by the server's clock.

        True when inserted (or when it replaced an expired row); False when a live
        row exists. One statement.
        """

    @abstractmethod
    async def _server_sweep_claims(self, connection: ConnectionT) -> int:
        """Delete claim rows that expired; return how many."""

    async def _server_fence(self, connection: ConnectionT, name: str) -> int:
        """Increment and return the fencing counter of `name`."""
        raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")

    async def _server_acquire_fenced(self, connection: ConnectionT, name: str) -> int | None:
        """Take the server lock and return the next fencing token; override for one trip."""
        if not await self._server_acquire(connection, name):
            return None
        return await self._server_fence(connection, name)

    # -- AsyncBaseLock hooks -----------------------------------------------------------

    async def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        async with self._connection_mutex:
            won = await self._run(
                lambda connection: self._server_acquire(connection, name), undo=name
            )
            if won:
                self._owner_generation[owner] = self._generation
            return won

    async def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        async with self._connection_mutex:
            token = await self._run(
                lambda connection: self._server_acquire_fenced(connection, name), undo=name
            )
            if token is not None:
                self._owner_generation[owner] = self._generation
            return token

    async def _release(self, name: str, owner: str) -> bool:
        async with self._connection_mutex:
            if not self._owns(owner, forget=True):
                return False  # the session died, and the lock with it
            try:
                return await self._run(
                    lambda connection: self._server_release(connection, name), retry=False
                )
            except self.driver_errors as err:
                if self._connection is None:
                    raise  # the session ended: nothing left to release
                self._queue_unlock(name)
                logger.warning(
                    "%s lock %r: release failed (%s); it stays held by this session until "
                    "it is released before the next statement",
                    self.backend_name,
                    name,
                    self._describe(err),
                )
                return True

    async def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        async with self._connection_mutex:
            if not self._owns(owner):
                return False
            generation = self._generation
            try:
                return await self._run(
                    lambda connection: self._server_holds(connection, name), retry=False
                )
            except self.driver_errors as err:
                if self._generation != generation:
                    return False  # the session ended, and every lock of it
                # A session lock lives as long as its session, which is still there.
                logger.warning(
                    "%s lock %r: checking the session's hold failed (%s); the session is "
                    "alive, so it still holds the lock",
                    self.backend_name,
                    name,
                    self._describe(err),
                )
                return True

    async def _fence(self, name: str) -> int:
        async with self._connection_mutex:
            return await self._run(lambda connection: self._server_fence(connection, name))

    async def _claim(self, name: str, seconds: float) -> bool:
        """Insert the claim row; a retry that finds the name claimed is an unknown outcome.

        A claim row outlives its session, so resending it is not idempotent: when the
        first attempt's session died after the server committed the row (the reply was
        lost), the retry meets that very row. Reporting it as claimed elsewhere would
        make every node pass the fire over unrecorded; the caller records the error.
        """
        attempts = 0

        async def claim_once(connection: ConnectionT) -> bool:
            nonlocal attempts
            attempts += 1
            won = await self._server_claim(connection, name, seconds)
            if not won and attempts > 1:
                raise LockBackendError(
                    f"{self.backend_name} lock backend {self._target}: the claim of {name!r} "
                    "has an unknown outcome: its first attempt ended with its session, and the "
                    "retry found it claimed, by that attempt (whose reply was lost) or by "
                    "another node"
                )
            return won

        async with self._connection_mutex:
            won = await self._run(claim_once)
            await self._sweep_when_due()
            return won

    async def _close(self) -> None:
        async with self._connection_mutex:
            await self._drop_session()

    # -- machinery ----------------------------------------------------------------

    if ASYNC:

        async def _run(
            self,
            statement: _Statement[ConnectionT, _R],
            *,
            undo: str | None = None,
            retry: bool = True,
        ) -> _R:
            """`_attempts`, with what a cancelled caller leaves behind put right.

            A cancelled statement must not end the session (`_to_completion`), and an
            acquisition that may have won for a caller who is gone must not keep the
            server lock, which no holding owns (`undo`).
            """
            work = self._attempts(statement, undo=undo, retry=retry)
            if not self.cancel_safe_driver:
                return await self._to_completion(work, undo)
            try:
                return await work
            except asyncio.CancelledError:
                # The driver read the statement's end; whether it won is unknown, and
                # releasing a lock the session does not hold is harmless.
                if undo is not None:
                    await self._undo_for_cancelled(undo)
                raise

        async def _to_completion(self, work: Awaitable[_R], undo: str | None) -> _R:
            """Finish `work` (statements on the session) even when the caller is cancelled.

            A statement cancelled mid-reply leaves the driver between two packets, and
            asyncmy then closes the connection, which ends the session and frees every
            lock it holds. So the round trip always completes, under the mutex the
            caller holds; an acquisition that won for a caller who is gone is released
            at once (`undo`), and only then does the cancellation go on.
            """
            task = asyncio.ensure_future(work)
            try:
                return await asyncio.shield(task)
            except asyncio.CancelledError:
                await _completion(task)
                # `_won` reads the task's outcome, so its failure is never left unread.
                if _won(task) and undo is not None:
                    await self._undo_for_cancelled(undo)
                raise

        async def _undo_for_cancelled(self, name: str) -> None:
            """Release `name` now, for a cancelled caller; else before the next statement."""
            self._queue_unlock(name)
            if self._connection is not None:
                flush = self._flush_unlocks_quietly(self._connection)
                await _completion(asyncio.ensure_future(flush))

    async def _attempts(
        self,
        statement: _Statement[ConnectionT, _R],
        *,
        undo: str | None = None,
        retry: bool = True,
    ) -> _R:
        """Run `statement` on the session (under the connection mutex).

        `undo`: the server lock the statement may have taken before it failed. With
        `retry`, an idle session (no holding on it) that turns out dead is replaced
        once at once: a server restart or an idle timeout lost no lock, so the call
        should not fail for it.
        """
        idle = self._connection is not None and not self._owner_generation
        try:
            return await self._on_session(statement, undo)
        except self.driver_errors:
            if not (retry and idle and self._connection is None):
                raise
        return await self._on_session(statement, undo)

    async def _on_session(
        self,
        statement: _Statement[ConnectionT, _R],
        undo: str | None,
    ) -> _R:
        connection = await self._session()
        try:
            return await statement(connection)
        except self.driver_errors:
            if not self._alive(connection):
                await self._session_lost()
            elif undo is not None:
                self._queue_unlock(undo)
                await self._flush_unlocks_quietly(connection)
            raise

    async def _session(self) -> ConnectionT:
        """The live session, connected on demand, with queued unlocks flushed first."""
        self._forget_inherited_connection()
        if self._connection is None:
            self._connection = await self._connect()
            self._connection_pid = os.getpid()
        connection = self._connection
        if self._pending_unlocks:
            await self._flush_unlocks(connection)
        return connection

    async def _flush_unlocks(self, connection: ConnectionT) -> None:
        """Release every queued server lock; raises (and keeps the rest queued) on failure."""
        while self._pending_unlocks:
            name = self._pending_unlocks[0]
            try:
                await self._server_release(connection, name)
            except self.driver_errors:
                if not self._alive(connection):
                    await self._session_lost()
                raise
            self._pending_unlocks.pop(0)

    async def _flush_unlocks_quietly(self, connection: ConnectionT) -> None:
        try:
            await self._flush_unlocks(connection)
        except self.driver_errors as err:
            logger.warning(
                "%s lock: undoing a failed acquisition failed too (%s); retried before the "
                "next statement",
                self.backend_name,
                self._describe(err),
            )

    def _queue_unlock(self, name: str) -> None:
        if name not in self._pending_unlocks:
            self._pending_unlocks.append(name)

    def _owns(self, owner: str, *, forget: bool = False) -> bool:
        """Whether `owner`'s holding belongs to the live session (checked under the mutex)."""
        self._forget_inherited_connection()
        generation = (
            self._owner_generation.pop(owner, None) if forget else self._owner_generation.get(owner)
        )
        return self._connection is not None and generation == self._generation

    async def _sweep_when_due(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.claim_sweep_seconds
        try:
            await self._run(self._server_sweep_claims, retry=False)
        except self.driver_errors as err:  # the next sweep tries again
            logger.warning(
                "%s lock: sweeping expired fire claims failed (%s)",
                self.backend_name,
                self._describe(err),
            )

    async def _drop_session(self) -> None:
        """Disconnect, then forget the session (see `_forget_session`)."""
        if self._connection is not None:
            await self._disconnect(self._connection)
        self._forget_session()

    def _forget_session(self) -> None:
        """Forget the session: no connection, a new generation, no owners, no pending unlocks."""
        self._connection = None
        self._generation += 1
        self._owner_generation.clear()
        self._pending_unlocks.clear()

    def _forget_inherited_connection(self) -> None:
        """After a fork (gunicorn --preload, multiprocessing), the parent's session is not ours.

        Closing it would end the parent's session and free the parent's locks, so the
        child drops the reference without closing it and forgets the parent's holdings.
        """
        if self._connection is None or self._connection_pid == os.getpid():
            return
        self._forget_session()
        self._ledger.forget_all()

    async def _session_lost(self) -> None:
        """Drop the dead connection and mark every holding of its session as lost."""
        await self._drop_session()
        for holding in self._ledger.mark_lost():
            logger.error(
                "%s lock %r is lost: its session %s ended",
                self.backend_name,
                holding.name,
                self._target,
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
