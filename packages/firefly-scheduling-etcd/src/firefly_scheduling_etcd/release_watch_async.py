"""`AsyncReleaseWatch`: one etcd watch per lock, waking waiters when their key is deleted.

A release revokes the holding's lease and a lapsed lease is revoked by the cluster:
either way the lock key is deleted, and a watch reports it (`protocol.watch_releases`),
so a waiter on etcd needs no polling and no guess of the holder's lease. A lock's
waiters share one watch of the whole lock prefix, on a stream of its own outside the
lock's pool (`gateway.WatchStream`), opened when the first waiter arrives and closed
when the last leaves, so an ended or cancelled wait leaves no watch on the server.
The listener reads the stream and wakes the waiters of each deleted key; the
waiters' bookkeeping is the core's (`locks.release_notifications_async`).

The watch is `live` once the server confirmed its creation. If the stream ends, it
is not live any more and every waiter is woken, to fall back on polling.

Written once, for asyncio; `release_watch.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncReleaseWatch ReleaseWatch
# async-to-sync: rename AsyncReleaseNotifications ReleaseNotifications
# async-to-sync: rename AsyncWatchStream WatchStream
# async-to-sync: rename firefly_scheduling_etcd.asyncio_gateway firefly_scheduling_etcd.gateway
# async-to-sync: rename asyncio.Event threading.Event

from __future__ import annotations

import asyncio  # sync: import threading
import contextlib
import logging
import ssl

from firefly_scheduling.locks.release_notifications_async import AsyncReleaseNotifications
from firefly_scheduling_etcd import protocol
from firefly_scheduling_etcd.asyncio_gateway import AsyncWatchStream
from firefly_scheduling_etcd.url import EtcdUrl

logger = logging.getLogger("firefly_scheduling.locks")


class AsyncReleaseWatch(AsyncReleaseNotifications):
    """The waiters of one lock, woken by the deletion of their key."""

    listener_name = "firefly-release-watch"

    def __init__(self, member: EtcdUrl, context: ssl.SSLContext | None) -> None:
        super().__init__()
        self._member, self._context = member, context
        self._stream: AsyncWatchStream | None = None
        self._created: asyncio.Event | None = None
        self._live = False
        #: Keys waited for whose deletion arrived since their waiter's last attempt.
        self._deleted: set[bytes] = set()

    @property
    def live(self) -> bool:
        """Whether a deletion reaches the waiters now."""
        with self._mutex:
            return self._live

    def take_deleted(self, key: bytes) -> bool:
        """Whether `key`'s deletion arrived since this was last asked (and forget it)."""
        with self._mutex:
            deleted = key in self._deleted
            self._deleted.discard(key)
        return deleted

    async def _subscribe(self, key: bytes, *, first: bool) -> asyncio.Event | None:
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
        self._start(self._listen, stream, self._created)
        return self._created

    async def _unsubscribe(self, key: bytes, *, last: bool) -> None:
        with self._mutex:
            self._deleted.discard(key)
        if last:
            await self._close()  # closing the stream cancels the watch

    async def _listen(self, stream: AsyncWatchStream, created: asyncio.Event) -> None:
        """Read the stream until it ends; then the watch is no longer live."""
        try:
            async for line in stream.lines():
                confirmed, keys = protocol.deleted_keys(line)
                with self._mutex:
                    self._live = self._live or confirmed
                    waited = [key for key in keys if key in self._wakes]
                    self._deleted.update(waited)
                    woken = self._waking(waited)
                if confirmed:
                    created.set()
                for wake in woken:
                    wake()
        except Exception as err:  # noqa: BLE001 - lost, or closed by `_close`
            logger.debug("etcd watch ended (%r); waiters poll", err)
        with self._mutex:
            if self._stream is not stream:
                return  # closed by `_close`: nobody waits on it
            self._live = False
            woken = self._everyone()
        for wake in woken:
            wake()

    async def _close(self) -> None:
        stream, self._stream = self._stream, None
        with self._mutex:
            self._live = False
        if stream is not None:
            await self._stop()
            with contextlib.suppress(Exception):
                await stream.aclose()
