"""`AsyncReleaseWatch`: one etcd watch per lock, waking waiters when their key is deleted.

A release revokes the holding's lease and a lapsed lease is revoked by the cluster:
either way the lock key is deleted, and a watch reports it (`protocol.watch_releases`),
so a waiter on etcd needs no polling and no guess of the holder's lease. A lock's
waiters share one watch of the whole lock prefix, on a stream of its own outside the
lock's pool (`gateway.WatchStream`), opened when the first waiter arrives and closed
when the last leaves, so an ended or cancelled wait leaves no watch on the server. A
listener (an asyncio task; a thread in the synchronous twin) reads the stream and
wakes the waiters of each deleted key.

The watch counts only once the server confirmed its creation: a deletion before that
would go unseen, so `watching` returns only after it (or, without it, the waiter
polls). If the stream ends, the watch stops being `live` and every waiter is woken,
to fall back on polling.

Written once, for asyncio; `release_watch.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncReleaseWatch ReleaseWatch
# async-to-sync: rename AsyncWatchStream WatchStream
# async-to-sync: rename firefly_scheduling_etcd.asyncio_gateway firefly_scheduling_etcd.gateway
# async-to-sync: rename asyncio.Event threading.Event
# async-to-sync: rename asyncio.Lock threading.Lock

from __future__ import annotations

import asyncio  # sync: import threading
import contextlib
import logging
import ssl
import threading  # sync: drop
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.waiting_async import wait_at_most
from firefly_scheduling_etcd import protocol
from firefly_scheduling_etcd.asyncio_gateway import AsyncWatchStream
from firefly_scheduling_etcd.url import EtcdUrl

logger = logging.getLogger("firefly_scheduling.locks")

#: Longest a waiter waits for the watch's confirmation before it polls instead.
CONFIRM_SECONDS = 3.0
_THREAD_NAME = "firefly-release-watch"


class AsyncReleaseWatch:
    """The waiters of one lock, woken by the deletion of their key."""

    def __init__(self, member: EtcdUrl, context: ssl.SSLContext | None) -> None:
        self._member, self._context = member, context
        #: Orders the stream's opening and closing.
        self._opening = asyncio.Lock()
        #: Guards the table below and `_live`; never held across I/O.
        self._mutex = threading.Lock()
        self._wakes: dict[bytes, list[Callable[[], None]]] = {}
        #: Keys waited for whose deletion arrived since their waiter's last attempt.
        self._deleted: set[bytes] = set()
        self._live = False
        self._created: asyncio.Event | None = None
        self._stream: AsyncWatchStream | None = None
        self._listener: Any = None

    @property
    def live(self) -> bool:
        """Whether a deletion reaches the waiters now."""
        with self._mutex:
            return self._live

    def take_deleted(self, key: bytes) -> bool:
        """Whether `key`'s deletion arrived since this was last asked (and forget it)."""
        with self._mutex:
            if key not in self._deleted:
                return False
            self._deleted.discard(key)
            return True

    @asynccontextmanager
    async def watching(self, key: bytes, wake: Callable[[], None]) -> AsyncIterator[None]:
        """Call `wake()` on each deletion of `key` while the block runs."""
        try:
            created = await self._join(key, wake)
            if created is not None:
                await wait_at_most(created, CONFIRM_SECONDS)
            yield
        finally:
            await self._leave(key, wake)

    async def _join(self, key: bytes, wake: Callable[[], None]) -> asyncio.Event | None:
        async with self._opening:
            with self._mutex:
                self._wakes.setdefault(key, []).append(wake)
            if self._stream is not None:
                return self._created
            stream = AsyncWatchStream(self._member, self._context)
            self._stream, self._created = stream, asyncio.Event()
            try:
                await stream.open(protocol.watch_releases())
            except Exception as err:  # noqa: BLE001 - the waiter polls instead
                logger.debug("etcd watch unavailable (%s); polling", err)
                self._stream = None
                with contextlib.suppress(Exception):
                    await stream.aclose()
                return None
            if ASYNC:
                self._listener = asyncio.ensure_future(self._listen(stream, self._created))
            else:
                self._listener = threading.Thread(
                    target=self._listen, args=(stream, self._created), name=_THREAD_NAME
                )
                self._listener.daemon = True
                self._listener.start()
            return self._created

    async def _leave(self, key: bytes, wake: Callable[[], None]) -> None:
        async with self._opening:
            with self._mutex:
                wakes = self._wakes.get(key, [])
                if wake not in wakes:
                    return  # cancelled before it joined
                wakes.remove(wake)
                if not wakes:
                    del self._wakes[key]
                    self._deleted.discard(key)
                last = not self._wakes
            if last:
                await self._drop()  # closing the stream cancels the watch

    async def _listen(self, stream: AsyncWatchStream, created: asyncio.Event) -> None:
        """Read the stream until it ends; then the watch is no longer live."""
        try:
            async for line in stream.lines():
                confirmed, keys = protocol.deleted_keys(line)
                with self._mutex:
                    if confirmed:
                        self._live = True
                    waited = [key for key in keys if key in self._wakes]
                    self._deleted.update(waited)
                    wakes = [wake for key in waited for wake in self._wakes[key]]
                if confirmed:
                    created.set()
                for wake in wakes:
                    wake()
        except Exception as err:  # noqa: BLE001 - lost, or closed by `_drop`
            logger.debug("etcd watch ended (%r); waiters poll", err)
        with self._mutex:
            if self._stream is not stream:
                return  # closed by `_drop`: nobody waits on it
            self._live = False
            woken = [wake for wakes in self._wakes.values() for wake in wakes]
        for wake in woken:
            wake()

    async def _drop(self) -> None:
        """Close the stream, if open, and stop its listener."""
        stream = self._stream
        listener = self._listener  # sync: drop
        with self._mutex:
            self._stream = self._listener = None
            self._live = False
        if stream is None:
            return
        if ASYNC:
            listener.cancel()
            with contextlib.suppress(BaseException):
                await listener
        with contextlib.suppress(Exception):
            await stream.aclose()

    async def aclose(self) -> None:
        async with self._opening:
            await self._drop()
