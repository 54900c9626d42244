"""`AsyncReleaseListener`: one subscriber connection per lock, waking waiters on releases.

The release script publishes on the name's channel (`protocol.release_channel`). A
lock's waiters share one connection of their own, outside the lock's pool (a
subscribed connection can send nothing else, and the pool's bound belongs to the
lock's commands), opened when the first waiter subscribes and closed when the last
leaves, so an ended or cancelled wait leaves no subscription on the server. The
listener reads the messages and wakes the waiters of their channel; the waiters'
bookkeeping is the core's (`locks.release_notifications_async`).

A channel is `live` once the server confirmed its subscription. Pub/sub delivers at
most once: if the connection drops, no channel is live any more and every waiter is
woken, to fall back on polling.

Written once, for asyncio; `release_listener.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncReleaseListener ReleaseListener
# async-to-sync: rename AsyncReleaseNotifications ReleaseNotifications
# async-to-sync: rename asyncio.Event threading.Event

from __future__ import annotations

import asyncio  # sync: import threading
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.release_notifications_async import AsyncReleaseNotifications

logger = logging.getLogger("firefly_scheduling.locks")

#: Opens a connected subscriber connection, or gives None (see `AsyncReleaseListener`).
if ASYNC:
    Connect: TypeAlias = Callable[[], Awaitable[Any]]
else:
    Connect: TypeAlias = Callable[[], Any]


class AsyncReleaseListener(AsyncReleaseNotifications):
    """The waiters of one lock, subscribed to their names' release channels.

    `connect` opens a new subscriber connection (a redis-py `Connection`, connected),
    or returns None when the client offers none (the waiters then poll).
    """

    def __init__(self, connect: Connect) -> None:
        super().__init__()
        self._connect = connect
        self._confirmed: dict[bytes, asyncio.Event] = {}
        self._live: set[bytes] = set()
        self._connection: Any = None

    def live(self, channel: bytes) -> bool:
        """Whether a release on `channel` reaches its waiters now."""
        with self._mutex:
            return channel in self._live

    async def _subscribe(self, key: bytes, *, first: bool) -> asyncio.Event | None:
        with self._mutex:
            if not first:
                return self._confirmed.get(key)
            confirmed = self._confirmed[key] = asyncio.Event()
        try:
            if self._connection is None:
                connection = await self._connect()
                if connection is None:
                    return None
                self._connection = connection
                self._start(self._listen, connection)
            await self._connection.send_command("SUBSCRIBE", key, check_health=False)
        except Exception as err:  # noqa: BLE001 - the waiter polls instead
            logger.debug("release notifications unavailable (%s); polling", err)
            await self._close()
            return None
        return confirmed

    async def _unsubscribe(self, key: bytes, *, last: bool) -> None:
        with self._mutex:
            self._confirmed.pop(key, None)
            self._live.discard(key)
        if self._connection is None:
            return
        if last:
            await self._close()  # closing the connection ends its subscriptions
            return
        try:
            await self._connection.send_command("UNSUBSCRIBE", key, check_health=False)
        except Exception:  # noqa: BLE001 - a lost connection subscribes to nothing
            await self._close()

    async def _listen(self, connection: Any) -> None:
        """Read the connection's messages until it closes; then no channel is live."""
        try:
            while True:
                reply = await connection.read_response(push_request=True)
                kind, channel = _text(reply[0]), _channel(reply[1])
                with self._mutex:
                    confirmed = self._confirmed.get(channel) if kind == "subscribe" else None
                    if confirmed is not None:
                        self._live.add(channel)
                    woken = self._waking([channel]) if kind == "message" else []
                if confirmed is not None:
                    confirmed.set()
                for wake in woken:
                    wake()
        except Exception as err:  # noqa: BLE001 - lost, or closed by `_close`
            with self._mutex:
                if self._connection is not connection:
                    return
                logger.debug("release notifications lost (%r); waiters poll", err)
                self._live.clear()
                woken = self._everyone()
            for wake in woken:
                wake()

    async def _close(self) -> None:
        connection, self._connection = self._connection, None
        with self._mutex:
            self._live.clear()
        if connection is not None:
            await self._stop()
            with contextlib.suppress(Exception):
                await connection.disconnect()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _channel(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value
