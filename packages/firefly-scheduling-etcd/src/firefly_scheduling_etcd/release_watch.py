# Generated from release_watch_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`ReleaseWatch`: one etcd watch per lock, waking waiters when their key is deleted.

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

from __future__ import annotations

import contextlib
import logging
import ssl
import threading

from firefly_scheduling.locks.release_notifications import ReleaseNotifications
from firefly_scheduling_etcd import protocol
from firefly_scheduling_etcd.gateway import WatchStream
from firefly_scheduling_etcd.url import EtcdUrl

logger = logging.getLogger("firefly_scheduling.locks")


class ReleaseWatch(ReleaseNotifications):
    """The waiters of one lock, woken by the deletion of their key."""

    listener_name = "firefly-release-watch"

    def __init__(self, member: EtcdUrl, context: ssl.SSLContext | None) -> None:
        super().__init__()
        self._member, self._context = member, context
        self._stream: WatchStream | None = None
        self._created: threading.Event | None = None
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

    def _subscribe(self, key: bytes, *, first: bool) -> threading.Event | None:
        if self._stream is not None:
            return self._created
        stream = WatchStream(self._member, self._context)
        self._stream, self._created = stream, threading.Event()
        try:
            stream.open(protocol.watch_releases())
        except Exception as err:  # noqa: BLE001 - the waiter polls instead
            logger.debug("etcd watch unavailable (%s); polling", err)
            self._stream = None
            with contextlib.suppress(Exception):
                stream.close()
            return None
        self._start(self._listen, stream, self._created)
        return self._created

    def _unsubscribe(self, key: bytes, *, last: bool) -> None:
        with self._mutex:
            self._deleted.discard(key)
        if last:
            self._close()  # closing the stream cancels the watch

    def _listen(self, stream: WatchStream, created: threading.Event) -> None:
        """Read the stream until it ends; then the watch is no longer live."""
        try:
            for line in stream.lines():
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

    def _close(self) -> None:
        stream, self._stream = self._stream, None
        with self._mutex:
            self._live = False
        if stream is not None:
            self._stop()
            with contextlib.suppress(Exception):
                stream.close()
