# Generated from release_watch_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`ReleaseWatch`: one etcd watch per lock, waking waiters when their key is deleted.

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

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from firefly_scheduling.locks.waiting import wait_at_most
from firefly_scheduling_etcd import protocol
from firefly_scheduling_etcd.gateway import WatchStream
from firefly_scheduling_etcd.url import EtcdUrl

logger = logging.getLogger("firefly_scheduling.locks")

#: Longest a waiter waits for the watch's confirmation before it polls instead.
CONFIRM_SECONDS = 3.0
_THREAD_NAME = "firefly-release-watch"


class ReleaseWatch:
    """The waiters of one lock, woken by the deletion of their key."""

    def __init__(self, member: EtcdUrl, context: ssl.SSLContext | None) -> None:
        self._member, self._context = member, context
        #: Orders the stream's opening and closing.
        self._opening = threading.Lock()
        #: Guards the table below and `_live`; never held across I/O.
        self._mutex = threading.Lock()
        self._wakes: dict[bytes, list[Callable[[], None]]] = {}
        #: Keys waited for whose deletion arrived since their waiter's last attempt.
        self._deleted: set[bytes] = set()
        self._live = False
        self._created: threading.Event | None = None
        self._stream: WatchStream | None = None
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

    @contextmanager
    def watching(self, key: bytes, wake: Callable[[], None]) -> Iterator[None]:
        """Call `wake()` on each deletion of `key` while the block runs."""
        try:
            created = self._join(key, wake)
            if created is not None:
                wait_at_most(created, CONFIRM_SECONDS)
            yield
        finally:
            self._leave(key, wake)

    def _join(self, key: bytes, wake: Callable[[], None]) -> threading.Event | None:
        with self._opening:
            with self._mutex:
                self._wakes.setdefault(key, []).append(wake)
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
            self._listener = threading.Thread(
                target=self._listen, args=(stream, self._created), name=_THREAD_NAME
            )
            self._listener.daemon = True
            self._listener.start()
            return self._created

    def _leave(self, key: bytes, wake: Callable[[], None]) -> None:
        with self._opening:
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
                self._drop()  # closing the stream cancels the watch

    def _listen(self, stream: WatchStream, created: threading.Event) -> None:
        """Read the stream until it ends; then the watch is no longer live."""
        try:
            for line in stream.lines():
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

    def _drop(self) -> None:
        """Close the stream, if open, and stop its listener."""
        stream = self._stream
        with self._mutex:
            self._stream = self._listener = None
            self._live = False
        if stream is None:
            return
        with contextlib.suppress(Exception):
            stream.close()

    def close(self) -> None:
        with self._opening:
            self._drop()
