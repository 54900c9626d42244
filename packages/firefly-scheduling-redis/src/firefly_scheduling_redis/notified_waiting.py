# Generated from notified_waiting_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
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

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import redis
import redis.cluster

from firefly_scheduling.concurrency.pool_gate import PoolGate, gated
from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.locks.waiting import Backoff
from firefly_scheduling_redis import protocol
from firefly_scheduling_redis.client import subscriber_connection
from firefly_scheduling_redis.release_listener import ReleaseListener

Client = redis.Redis | redis.cluster.RedisCluster


class NotifiedWaiting(BaseLock):
    """The waiting hooks of the Redis lock (see the module doc)."""

    notified_wait: ClassVar[bool] = True
    _cluster: bool
    _gate: PoolGate | None
    _listener: ReleaseListener

    def _redis(self) -> Client:
        raise NotImplementedError

    @contextmanager
    def _release_signal(self, name: str, wake: Any) -> Iterator[None]:
        """Subscribed to the name's release channel (`release_listener_async`)."""
        channel = protocol.release_channel(name, cluster=self._cluster)
        with self._listener.notified(channel, wake):
            yield

    def _pause_after_loss(self, name: str, backoff: Backoff) -> float:
        """Notified: until the holder's lease ends (a lapse publishes nothing), at most
        `notified_recheck_seconds`. Else (no subscription) the backoff's next pause."""
        if not self._listener.live(protocol.release_channel(name, cluster=self._cluster)):
            return backoff.next()
        try:
            left = self._lease_left(name)
        except self.driver_errors:
            return backoff.next()  # the next attempt reports the server's state
        longest = self.notified_recheck_seconds
        return longest if left is None else min(left, longest)

    def _lease_left(self, name: str) -> float | None:
        """Seconds left on the lease of `name` (0 when free); None if it never expires."""
        key = protocol.lock_key(name, cluster=self._cluster)
        with gated(self._gate):
            milliseconds = int((self._redis()).pttl(key))
        return None if milliseconds == -1 else max(milliseconds, 0) / 1000

    def _subscriber(self) -> Any:
        """A connected subscriber connection of the lock's own, or None (see `client`)."""
        connection = subscriber_connection(self._redis())
        if connection is not None:
            connection.connect()
        return connection
