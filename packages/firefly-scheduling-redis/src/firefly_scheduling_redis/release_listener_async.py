"""`AsyncReleaseListener`: one subscriber connection per lock, waking waiters on releases.

The release script publishes on the name's channel (`protocol.release_channel`). A
lock's waiters share one connection of their own, outside the lock's pool (a
subscribed connection can send nothing else, and the pool's bound belongs to the
lock's commands), opened when the first waiter subscribes and closed when the last
leaves, so an ended or cancelled wait leaves no subscription on the server. A
listener (an asyncio task; a thread in the synchronous twin) reads the messages and
calls the wake-ups of the waiters of that channel.

A subscription counts only once the server confirmed it: a release published before
that would go unseen, so `subscribed` returns only after the confirmation (or
without one, and the waiter then polls). Pub/sub delivers at most once: if the
connection drops, every channel stops being `live` and its waiters are woken, to fall
back on polling.

Written once, for asyncio; `release_listener.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncReleaseListener ReleaseListener
# async-to-sync: rename asyncio.Event threading.Event
# async-to-sync: rename asyncio.Lock threading.Lock

from __future__ import annotations

import asyncio  # sync: import threading
import contextlib
import logging
import threading  # sync: drop
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.waiting_async import wait_at_most

logger = logging.getLogger("firefly_scheduling.locks")

#: Opens a connected subscriber connection, or gives None (see `AsyncReleaseListener`).
if ASYNC:
    Connect: TypeAlias = Callable[[], Awaitable[Any]]
else:
    Connect: TypeAlias = Callable[[], Any]
#: Longest a subscription waits for the server's confirmation before its waiter polls.
CONFIRM_SECONDS = 3.0
_THREAD_NAME = "firefly-release-listener"


class AsyncReleaseListener:
    """The waiters of one lock, subscribed to their names' release channels.

    `connect` opens a new subscriber connection (a redis-py `Connection`, connected),
    or returns None when the client offers none (the waiters then poll).
    """

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        #: Orders subscribes, unsubscribes and the connection's opening and closing.
        self._sending = asyncio.Lock()
        #: Guards the tables below; never held across I/O.
        self._mutex = threading.Lock()
        self._wakes: dict[bytes, list[Callable[[], None]]] = {}
        self._confirmed: dict[bytes, asyncio.Event] = {}
        self._live: set[bytes] = set()
        self._connection: Any = None
        self._listener: Any = None

    def live(self, channel: bytes) -> bool:
        """Whether a release on `channel` reaches its waiters now."""
        with self._mutex:
            return channel in self._live

    @asynccontextmanager
    async def subscribed(self, channel: bytes, wake: Callable[[], None]) -> AsyncIterator[None]:
        """Call `wake()` on each release published on `channel` while the block runs."""
        try:
            confirmed = await self._join(channel, wake)
            if confirmed is not None:
                await wait_at_most(confirmed, CONFIRM_SECONDS)
            yield
        finally:
            await self._leave(channel, wake)

    async def _join(self, channel: bytes, wake: Callable[[], None]) -> asyncio.Event | None:
        async with self._sending:
            with self._mutex:
                wakes = self._wakes.setdefault(channel, [])
                wakes.append(wake)
                if len(wakes) > 1:
                    return self._confirmed.get(channel)
                confirmed = self._confirmed[channel] = asyncio.Event()
            try:
                connection = self._connection or await self._open()
                if connection is None:
                    return None
                await connection.send_command("SUBSCRIBE", channel, check_health=False)
            except Exception as err:  # noqa: BLE001 - the waiter polls instead
                logger.debug("release notifications unavailable (%s); polling", err)
                await self._drop()
                return None
            return confirmed

    async def _leave(self, channel: bytes, wake: Callable[[], None]) -> None:
        async with self._sending:
            with self._mutex:
                wakes = self._wakes.get(channel, [])
                if wake not in wakes:
                    return  # cancelled before it joined
                wakes.remove(wake)
                if wakes:
                    return
                del self._wakes[channel]
                self._confirmed.pop(channel, None)
                self._live.discard(channel)
                last = not self._wakes
            connection = self._connection
            if connection is None:
                return
            if last:
                await self._drop()  # closing the connection ends its subscriptions
                return
            try:
                await connection.send_command("UNSUBSCRIBE", channel, check_health=False)
            except Exception:  # noqa: BLE001 - a lost connection subscribes to nothing
                await self._drop()

    async def _open(self) -> Any:
        connection = await self._connect()
        if connection is None:
            return None
        self._connection = connection
        if ASYNC:
            self._listener = asyncio.ensure_future(self._listen(connection))
        else:
            self._listener = threading.Thread(
                target=self._listen, args=(connection,), name=_THREAD_NAME, daemon=True
            )
            self._listener.start()
        return connection

    async def _listen(self, connection: Any) -> None:
        """Read the connection's messages until it closes; then no channel is live."""
        try:
            while True:
                reply = await connection.read_response(push_request=True)
                kind, channel = _text(reply[0]), _channel(reply[1])
                with self._mutex:
                    if kind == "message":
                        wakes = list(self._wakes.get(channel, ()))
                    elif kind == "subscribe" and channel in self._confirmed:
                        self._live.add(channel)
                        self._confirmed[channel].set()
                        wakes = []
                    else:
                        wakes = []
                for wake in wakes:
                    wake()
        except Exception as err:  # noqa: BLE001 - lost, or closed by `_drop`
            with self._mutex:
                if self._connection is connection:
                    logger.debug("release notifications lost (%r); waiters poll", err)
                    self._live.clear()
                    woken = [wake for wakes in self._wakes.values() for wake in wakes]
                else:
                    woken = []
            for wake in woken:
                wake()

    async def _drop(self) -> None:
        """Close the subscriber connection, if open, and stop its listener."""
        connection = self._connection
        listener = self._listener  # sync: drop
        self._connection = self._listener = None
        with self._mutex:
            self._live.clear()
        if connection is None:
            return
        if ASYNC:
            listener.cancel()
            with contextlib.suppress(BaseException):
                await listener
        with contextlib.suppress(Exception):
            await connection.disconnect()

    async def aclose(self) -> None:
        async with self._sending:
            await self._drop()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _channel(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value
