"""`AsyncReleaseNotifications`: a lock's waiters, woken by the server when a name is freed.

The half of a backend's release notification (a Redis message, an etcd watch) that
does not depend on the server: which waiters wait for which key, the one listener
that reads the notifications (an asyncio task; a thread in the synchronous twin),
and the rule that a subscription counts only once the server confirmed it, since a
release before that would go unseen. A backend subclasses it with how it subscribes
and unsubscribes (`_subscribe`, `_unsubscribe`), what its listener reads, and when
it is `live`; `locks.base_waiting_async` uses it through a backend's
`_release_signal` and `_pause_after_loss`.

Written once, for asyncio; `release_notifications.py` is generated from it by
`tools/async_to_sync.py`.
"""

# async-to-sync: rename AsyncReleaseNotifications ReleaseNotifications
# async-to-sync: rename asyncio.Event threading.Event
# async-to-sync: rename asyncio.Lock threading.Lock

from __future__ import annotations

import asyncio  # sync: import threading
import contextlib
import threading  # sync: drop
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.locks.waiting_async import wait_at_most

#: Longest a subscription waits for the server's confirmation before its waiter polls.
CONFIRM_SECONDS = 3.0

Wake = Callable[[], None]


class AsyncReleaseNotifications(ABC):
    """The waiters of one lock, per key, and the listener that wakes them."""

    #: The listener thread's name (synchronous flavour).
    listener_name = "firefly-release-listener"

    def __init__(self) -> None:
        #: Orders subscribing and unsubscribing, and so opening and closing.
        self._ordering = asyncio.Lock()
        #: Guards `_wakes` and a subclass's tables; never held across I/O.
        self._mutex = threading.Lock()
        self._wakes: dict[bytes, list[Wake]] = {}
        self._listener: Any = None

    @asynccontextmanager
    async def notified(self, key: bytes, wake: Wake) -> AsyncIterator[None]:
        """Call `wake()` on each release of `key` the server reports while the block runs."""
        try:
            confirmed = await self._join(key, wake)
            if confirmed is not None:
                await wait_at_most(confirmed, CONFIRM_SECONDS)
            yield
        finally:
            await self._leave(key, wake)

    async def aclose(self) -> None:
        async with self._ordering:
            await self._close()

    # -- for subclasses ------------------------------------------------------------

    @abstractmethod
    async def _subscribe(self, key: bytes, *, first: bool) -> asyncio.Event | None:
        """Subscribe to `key` (`first`: no other waiter of this lock waits for it); the
        event the listener sets on the server's confirmation, or None when there is
        no subscription (the waiter polls)."""

    @abstractmethod
    async def _unsubscribe(self, key: bytes, *, last: bool) -> None:
        """No waiter waits for `key` any more (`last`: nor for any other key)."""

    @abstractmethod
    async def _close(self) -> None:
        """Close the connection the notifications arrive on, if open (`_stop` first)."""

    def _waking(self, keys: Iterable[bytes]) -> list[Wake]:
        """The wake-ups of the waiters of `keys` (call under `_mutex`)."""
        return [wake for key in keys for wake in self._wakes.get(key, ())]

    def _everyone(self) -> list[Wake]:
        """Every waiter's wake-up (call under `_mutex`): the notifications were lost."""
        return [wake for wakes in self._wakes.values() for wake in wakes]

    def _start(self, listen: Callable[..., Any], *args: Any) -> None:
        """Run `listen(*args)` as the listener: a task on the loop, or a daemon thread."""
        if ASYNC:
            self._listener = asyncio.ensure_future(listen(*args))
        else:
            self._listener = threading.Thread(
                target=listen, args=args, name=self.listener_name, daemon=True
            )
            self._listener.start()

    async def _stop(self) -> None:
        """Stop the listener: cancel its task. A thread ends when its connection closes."""
        listener = self._listener  # sync: self._listener = None
        self._listener = None  # sync: drop
        if ASYNC:  # noqa: SIM102 - the flavour's test: the synchronous twin drops it
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(BaseException):
                    await listener

    # -- the bookkeeping -------------------------------------------------------------

    async def _join(self, key: bytes, wake: Wake) -> asyncio.Event | None:
        async with self._ordering:
            with self._mutex:
                wakes = self._wakes.setdefault(key, [])
                wakes.append(wake)
                first = len(wakes) == 1
            return await self._subscribe(key, first=first)

    async def _leave(self, key: bytes, wake: Wake) -> None:
        async with self._ordering:
            with self._mutex:
                wakes = self._wakes.get(key, [])
                if wake not in wakes:
                    return  # cancelled before it joined
                wakes.remove(wake)
                if wakes:
                    return
                del self._wakes[key]
                last = not self._wakes
            await self._unsubscribe(key, last=last)
