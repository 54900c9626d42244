"""How the Redis lock's waiters wait: in the name's queue, woken by the release's message.

A mixin of `AsyncRedisLock`, the waiting hooks of `locks.base_waiting_async`. The
release script publishes on the name's channel (`protocol.release_channel`); a
waiter subscribes to it before its first attempt, through the lock's one subscriber
connection (`release_listener_async`). Each waiter's turn holds a ticket in the
name's queue on the server (`waiter_queue`), so a free name goes to the waiter that
arrived first, whichever process it is in. After a lost attempt the waiter sleeps
until a message wakes it or for the pause the attempt's script returned (the
holder's lease left: a lapse publishes nothing; or the first ticket's deadline), at
most `notified_recheck_seconds`. Without a subscription (a Sentinel-managed client,
a lost subscriber connection) it polls with the core's capped, jittered backoff.

Written once, for asyncio; `notified_waiting.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncNotifiedWaiting NotifiedWaiting
# async-to-sync: rename AsyncReleaseListener ReleaseListener
# async-to-sync: rename AsyncPoolGate PoolGate
# async-to-sync: rename redis.asyncio.Redis redis.Redis
# async-to-sync: rename redis.asyncio.RedisCluster redis.cluster.RedisCluster

from __future__ import annotations

import asyncio  # sync: drop
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import redis.asyncio  # sync: import redis
import redis.asyncio.cluster  # sync: import redis.cluster

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.concurrency.pool_gate_async import AsyncPoolGate
from firefly_scheduling.locks.base_async import AsyncBaseLock
from firefly_scheduling.locks.holding import new_owner_token
from firefly_scheduling.locks.waiting_async import Backoff
from firefly_scheduling_redis import protocol, waiter_queue
from firefly_scheduling_redis.client import subscriber_connection
from firefly_scheduling_redis.release_listener_async import AsyncReleaseListener

logger = logging.getLogger("firefly_scheduling.locks")

Client = redis.asyncio.Redis | redis.asyncio.RedisCluster


@dataclass
class _Ticket:
    """One waiter's place in the name's queue on the server, for the length of its turn."""

    token: str
    #: An attempt carried it to the server (its reply may have been lost).
    sent: bool = False
    #: The winning attempt's script removed it.
    won: bool = False
    #: The pause the last lost attempt's script returned, in seconds.
    pause: float | None = None


class AsyncNotifiedWaiting(AsyncBaseLock):
    """The waiting hooks of the Redis lock (see the module doc)."""

    notified_wait: ClassVar[bool] = True
    queues_waiters: ClassVar[bool] = True
    _cluster: bool
    _gate: AsyncPoolGate | None
    _listener: AsyncReleaseListener

    def __init__(self, *, target: str = "", secrets: tuple[str, ...] = ()) -> None:
        super().__init__(target=target, secrets=secrets)
        #: The ticket of this instance's waiter in its turn, per name (one at a time).
        self._tickets: dict[str, _Ticket] = {}

    async def _redis(self) -> Client:
        raise NotImplementedError

    async def _eval(self, script: protocol.Script, keys: tuple[bytes, ...], args: Any) -> Any:
        raise NotImplementedError

    @asynccontextmanager
    async def _waiting_turn(self, name: str) -> AsyncIterator[None]:
        """A ticket for the turn, queued by its first lost attempt and removed at its end."""
        ticket = self._tickets[name] = _Ticket(new_owner_token())
        try:
            yield
        finally:
            del self._tickets[name]
            if ticket.sent and not ticket.won:
                await self._leave_queue_shielded(name, ticket.token)

    async def _acquire_in_turn(
        self, name: str, owner: str, ttl_seconds: float, *, fenced: bool
    ) -> int | bool | None:
        """`waiter_queue.ACQUIRE_IN_TURN` with the turn's ticket."""
        ticket = self._tickets[name]
        keys = waiter_queue.acquire_in_turn_keys(name, cluster=self._cluster)
        args = waiter_queue.acquire_in_turn_args(
            owner, ttl_seconds, ticket.token, self.notified_recheck_seconds, fenced=fenced
        )
        ticket.sent = True
        reply = await self._eval(waiter_queue.ACQUIRE_IN_TURN, keys, args)
        won, value = int(reply[0]), int(reply[1])
        if won:
            ticket.won = True
            return value if fenced else True
        ticket.pause = value / 1000
        return None if fenced else False

    async def _leave_queue_shielded(self, name: str, ticket: str) -> None:
        """`_leave_queue`, run to its end even when the wait is being cancelled."""
        if ASYNC:
            task = asyncio.ensure_future(self._leave_queue(name, ticket))
            while not task.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(task)
        else:
            self._leave_queue(name, ticket)

    async def _leave_queue(self, name: str, ticket: str) -> None:
        """Remove the ticket; a failure is logged: the ticket lapses at its deadline."""
        keys = waiter_queue.leave_queue_keys(name, cluster=self._cluster)
        args = waiter_queue.leave_queue_args(name, ticket, cluster=self._cluster)
        try:
            await self._eval(waiter_queue.LEAVE_QUEUE, keys, args)
        except Exception as err:  # noqa: BLE001 - the ticket lapses anyway; say so
            logger.warning(
                "redis lock %r: removing a waiter's ticket from the queue failed (%s); it "
                "lapses within %g s",
                name,
                self._describe(err),
                self.notified_recheck_seconds + waiter_queue.TICKET_GRACE_SECONDS,
            )

    @asynccontextmanager
    async def _release_signal(self, name: str, wake: Any) -> AsyncIterator[None]:
        """Subscribed to the name's release channel (`release_listener_async`)."""
        channel = protocol.release_channel(name, cluster=self._cluster)
        async with self._listener.notified(channel, wake):
            yield

    async def _pause_after_loss(self, name: str, backoff: Backoff) -> float:
        """Notified: the pause the lost attempt's script returned (the holder's lease
        left, or the first ticket's deadline), at most `notified_recheck_seconds`. Else
        (no subscription) the backoff's next pause."""
        if not self._listener.live(protocol.release_channel(name, cluster=self._cluster)):
            return backoff.next()
        pause = self._tickets[name].pause
        longest = self.notified_recheck_seconds
        return longest if pause is None else min(pause, longest)

    async def _subscriber(self) -> Any:
        """A connected subscriber connection of the lock's own, or None (see `client`)."""
        connection = subscriber_connection(await self._redis())
        if connection is not None:
            await connection.connect()
        return connection
