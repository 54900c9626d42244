"""`AsyncSessionWaits`: a session lock's waiting acquisition, in the server's own queue.

A middle layer of `AsyncSessionLock` (`locks.session_async`). PostgreSQL and MySQL
queue a session that asks for a held lock and hand it the lock the moment its holder
lets go (`pg_advisory_lock` under a `lock_timeout`, `GET_LOCK(name, timeout)`), so a
waiter wakes as fast as the server can tell it, and sends nothing while it waits.

A waiting statement occupies its session, so it waits in slices of at most
`wait_slice_seconds`, and between two slices the session serves whoever else needs
it (releases and keep-alive checks of the locks it carries). At most
`pool_size - 1` sessions wait at once (all of a one-session pool, in slices), so
the process's other locks always find a session: waiters never take the
connections the node's budget gives the lock (`concurrency.connection_budget`) away
from them. With more waiting names than that, their waits take turns, a slice each.

A cancelled wait leaves nothing behind. asyncio: the statement is cancelled on the
server (psycopg) or finished within its slice (asyncmy), and a lock it won is
released before the cancellation goes on (`_run`'s `undo`). A thread interrupted
by `KeyboardInterrupt`: a driver that keeps its connection usable
(`interrupt_safe_driver`: psycopg cancels the statement) has the name released on
it; otherwise the session is closed, which ends the server's wait and any lock it won
(and reports the other locks of that session lost).

Written once, for asyncio; `locks/session_waits.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncSessionAsks SessionAsks
# async-to-sync: rename AsyncSessionWaits SessionWaits
# async-to-sync: rename asyncio.Semaphore fair_semaphore.FairSemaphore

from __future__ import annotations

import asyncio  # sync: from firefly_scheduling.concurrency import fair_semaphore
from abc import abstractmethod
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import ClassVar, Generic

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.concurrency.forks import reset_in_forked_child
from firefly_scheduling.locks.session_asks_async import AsyncSessionAsks
from firefly_scheduling.locks.session_pool_async import ConnectionT, PooledSession


class AsyncSessionWaits(AsyncSessionAsks[ConnectionT], Generic[ConnectionT]):
    """Waiting acquisitions on the server, in slices, on at most `pool_size - 1` sessions."""

    waits_on_server = True
    #: Longest one waiting statement holds its session (well under the 5 s statement
    #: timeout the backends set, and the reply deadline).
    wait_slice_seconds: ClassVar[float] = 1.0
    #: The driver survives `KeyboardInterrupt` mid-statement with its connection usable.
    interrupt_safe_driver: ClassVar[bool] = False

    def __init__(self, *, target: str, secrets: tuple[str, ...] = (), pool_size: int = 1) -> None:
        super().__init__(target=target, secrets=secrets, pool_size=pool_size)
        self._wait_slots = asyncio.Semaphore(self._waiting_sessions())
        reset_in_forked_child(self, AsyncSessionWaits._free_wait_slots)

    def _waiting_sessions(self) -> int:
        return max(1, self.pool_size - 1)

    def _free_wait_slots(self) -> None:
        """In a forked child: the parent's waiters are not here."""
        self._wait_slots = asyncio.Semaphore(self._waiting_sessions())

    @abstractmethod
    async def _server_acquire_waiting(
        self, connection: ConnectionT, name: str, seconds: float
    ) -> bool:
        """Take the server lock for `name`, waiting in the server's queue up to `seconds`;
        False when it stayed taken (the server's lock timeout)."""

    async def _server_fence(self, connection: ConnectionT, name: str) -> int:
        """Increment and return the fencing counter of `name`."""
        raise NotImplementedError(f"the {self.backend_name} backend has no fencing tokens")

    async def _acquire_within(
        self, name: str, owner: str, ttl_seconds: float, seconds: float, *, fenced: bool
    ) -> int | bool | None:
        lost: int | bool | None = None if fenced else False
        wait = min(seconds, self.wait_slice_seconds)
        async with self._wait_slot(wait) as slotted:
            if not slotted:
                return lost
            async with self._any_session() as session:

                async def statement(connection: ConnectionT) -> int | bool | None:
                    if not await self._server_acquire_waiting(connection, name, wait):
                        return lost
                    return await self._server_fence(connection, name) if fenced else True

                if ASYNC:
                    answer = await self._run(session, statement, undo=(name,))
                else:
                    try:
                        answer = self._run(session, statement, undo=(name,))
                    except BaseException as err:
                        if not isinstance(err, self.driver_errors):
                            self._undo_interrupted_wait(session, name)
                        raise
                if answer is not None and answer is not False:
                    self._hold(session, owner)
                return answer

    @asynccontextmanager
    async def _wait_slot(self, seconds: float) -> AsyncIterator[bool]:
        """One of the sessions that may wait, if one frees within `seconds`."""
        slots = self._wait_slots
        if ASYNC:
            try:
                async with asyncio.timeout(seconds):
                    await slots.acquire()
            except TimeoutError:
                taken = False
            else:
                taken = True
        else:
            taken = slots.acquire(timeout=seconds)
        try:
            yield taken
        finally:
            if taken:
                slots.release()

    async def _undo_interrupted_wait(self, session: PooledSession[ConnectionT], name: str) -> None:
        """A `KeyboardInterrupt` cut a thread's waiting statement short: the server may
        have granted the lock, which no holding owns. (asyncio: `_run` does this.)"""
        connection = session.connection
        if connection is not None and self.interrupt_safe_driver and self._alive(connection):
            session.queue_unlock(name)
            await self._flush_unlocks_quietly(session, connection)
        else:
            await self._session_lost(session)
