# Generated from release_listener_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`ReleaseListener`: one subscriber connection per lock, waking waiters on releases.

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

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeAlias

from firefly_scheduling.locks.release_notifications import ReleaseNotifications

logger = logging.getLogger("firefly_scheduling.locks")

#: Opens a connected subscriber connection, or gives None (see `ReleaseListener`).
Connect: TypeAlias = Callable[[], Any]


class ReleaseListener(ReleaseNotifications):
    """The waiters of one lock, subscribed to their names' release channels.

    `connect` opens a new subscriber connection (a redis-py `Connection`, connected),
    or returns None when the client offers none (the waiters then poll).
    """

    def __init__(self, connect: Connect) -> None:
        super().__init__()
        self._connect = connect
        self._confirmed: dict[bytes, threading.Event] = {}
        self._live: set[bytes] = set()
        self._connection: Any = None

    def live(self, channel: bytes) -> bool:
        """Whether a release on `channel` reaches its waiters now."""
        with self._mutex:
            return channel in self._live

    def _subscribe(self, key: bytes, *, first: bool) -> threading.Event | None:
        with self._mutex:
            if not first:
                return self._confirmed.get(key)
            confirmed = self._confirmed[key] = threading.Event()
        try:
            if self._connection is None:
                connection = self._connect()
                if connection is None:
                    return None
                self._connection = connection
                self._start(self._listen, connection)
            self._connection.send_command("SUBSCRIBE", key, check_health=False)
        except Exception as err:  # noqa: BLE001 - the waiter polls instead
            logger.debug("release notifications unavailable (%s); polling", err)
            self._close()
            return None
        return confirmed

    def _unsubscribe(self, key: bytes, *, last: bool) -> None:
        with self._mutex:
            self._confirmed.pop(key, None)
            self._live.discard(key)
        if self._connection is None:
            return
        if last:
            self._close()  # closing the connection ends its subscriptions
            return
        try:
            self._connection.send_command("UNSUBSCRIBE", key, check_health=False)
        except Exception:  # noqa: BLE001 - a lost connection subscribes to nothing
            self._close()

    def _listen(self, connection: Any) -> None:
        """Read the connection's messages until it closes; then no channel is live."""
        try:
            while True:
                reply = connection.read_response(push_request=True)
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

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        with self._mutex:
            self._live.clear()
        if connection is not None:
            self._stop()
            with contextlib.suppress(Exception):
                connection.disconnect()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _channel(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value
