"""How the Redis lock's waiters wait: woken by the release's message, else polling.

A mixin of `AsyncRedisLock`, the waiting hooks of `locks.base_waiting_async`. The
release script publishes on the name's channel (`protocol.release_channel`); a
waiter subscribes to it before its first attempt, through the lock's one subscriber
connection (`release_listener_async`), and after a lost attempt sleeps until a
release wakes it or the holder's lease ends (a lapse publishes nothing), at most
`notified_recheck_seconds`. Without a subscription (a Sentinel-managed client, a
lost subscriber connection) it polls with the core's capped, jittered backoff.

Written once, for asyncio; `notified_waiting.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncNotifiedWaiting NotifiedWaiting
# async-to-sync: rename AsyncReleaseListener ReleaseListener
# async-to-sync: rename AsyncPoolGate PoolGate
# async-to-sync: rename redis.asyncio.Redis redis.Redis
# async-to-sync: rename redis.asyncio.RedisCluster redis.cluster.RedisCluster

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import redis.asyncio  # sync: import redis
import redis.asyncio.cluster  # sync: import redis.cluster

from firefly_scheduling.concurrency.pool_gate_async import AsyncPoolGate, gated
from firefly_scheduling.locks.base_async import AsyncBaseLock
from firefly_scheduling.locks.waiting_async import Backoff
from firefly_scheduling_redis import protocol
from firefly_scheduling_redis.client import subscriber_connection
from firefly_scheduling_redis.release_listener_async import AsyncReleaseListener

Client = redis.asyncio.Redis | redis.asyncio.RedisCluster


class AsyncNotifiedWaiting(AsyncBaseLock):
    """The waiting hooks of the Redis lock (see the module doc)."""

    notified_wait: ClassVar[bool] = True
    _cluster: bool
    _gate: AsyncPoolGate | None
    _listener: AsyncReleaseListener

    async def _redis(self) -> Client:
        raise NotImplementedError

    @asynccontextmanager
    async def _release_signal(self, name: str, wake: Any) -> AsyncIterator[None]:
        """Subscribed to the name's release channel (`release_listener_async`)."""
        channel = protocol.release_channel(name, cluster=self._cluster)
        async with self._listener.notified(channel, wake):
            yield

    async def _pause_after_loss(self, name: str, backoff: Backoff) -> float:
        """Notified: until the holder's lease ends (a lapse publishes nothing), at most
        `notified_recheck_seconds`. Else (no subscription) the backoff's next pause."""
        if not self._listener.live(protocol.release_channel(name, cluster=self._cluster)):
            return backoff.next()
        try:
            left = await self._lease_left(name)
        except self.driver_errors:
            return backoff.next()  # the next attempt reports the server's state
        longest = self.notified_recheck_seconds
        return longest if left is None else min(left, longest)

    async def _lease_left(self, name: str) -> float | None:
        """Seconds left on the lease of `name` (0 when free); None if it never expires."""
        key = protocol.lock_key(name, cluster=self._cluster)
        async with gated(self._gate):
            milliseconds = int(await (await self._redis()).pttl(key))
        return None if milliseconds == -1 else max(milliseconds, 0) / 1000

    async def _subscriber(self) -> Any:
        """A connected subscriber connection of the lock's own, or None (see `client`)."""
        connection = subscriber_connection(await self._redis())
        if connection is not None:
            await connection.connect()
        return connection
