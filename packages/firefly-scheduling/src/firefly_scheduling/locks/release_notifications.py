# Generated from release_notifications_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`ReleaseNotifications`: a lock's waiters, woken by the server when a name is freed.

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

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from firefly_scheduling.locks.waiting import wait_at_most

#: Longest a subscription waits for the server's confirmation before its waiter polls.
CONFIRM_SECONDS = 3.0

Wake = Callable[[], None]


class ReleaseNotifications(ABC):
    """The waiters of one lock, per key, and the listener that wakes them."""

    #: The listener thread's name (synchronous flavour).
    listener_name = "firefly-release-listener"

    def __init__(self) -> None:
        #: Orders subscribing and unsubscribing, and so opening and closing.
        self._ordering = threading.Lock()
        #: Guards `_wakes` and a subclass's tables; never held across I/O.
        self._mutex = threading.Lock()
        self._wakes: dict[bytes, list[Wake]] = {}
        self._listener: Any = None

    @contextmanager
    def notified(self, key: bytes, wake: Wake) -> Iterator[None]:
        """Call `wake()` on each release of `key` the server reports while the block runs."""
        try:
            confirmed = self._join(key, wake)
            if confirmed is not None:
                wait_at_most(confirmed, CONFIRM_SECONDS)
            yield
        finally:
            self._leave(key, wake)

    def close(self) -> None:
        with self._ordering:
            self._close()

    # -- for subclasses ------------------------------------------------------------

    @abstractmethod
    def _subscribe(self, key: bytes, *, first: bool) -> threading.Event | None:
        """Subscribe to `key` (`first`: no other waiter of this lock waits for it); the
        event the listener sets on the server's confirmation, or None when there is
        no subscription (the waiter polls)."""

    @abstractmethod
    def _unsubscribe(self, key: bytes, *, last: bool) -> None:
        """No waiter waits for `key` any more (`last`: nor for any other key)."""

    @abstractmethod
    def _close(self) -> None:
        """Close the connection the notifications arrive on, if open (`_stop` first)."""

    def _waking(self, keys: Iterable[bytes]) -> list[Wake]:
        """The wake-ups of the waiters of `keys` (call under `_mutex`)."""
        return [wake for key in keys for wake in self._wakes.get(key, ())]

    def _everyone(self) -> list[Wake]:
        """Every waiter's wake-up (call under `_mutex`): the notifications were lost."""
        return [wake for wakes in self._wakes.values() for wake in wakes]

    def _start(self, listen: Callable[..., Any], *args: Any) -> None:
        """Run `listen(*args)` as the listener: a task on the loop, or a daemon thread."""
        self._listener = threading.Thread(
            target=listen, args=args, name=self.listener_name, daemon=True
        )
        self._listener.start()

    def _stop(self) -> None:
        """Stop the listener: cancel its task. A thread ends when its connection closes."""
        self._listener = None

    # -- the bookkeeping -------------------------------------------------------------

    def _join(self, key: bytes, wake: Wake) -> threading.Event | None:
        with self._ordering:
            with self._mutex:
                wakes = self._wakes.setdefault(key, [])
                wakes.append(wake)
                first = len(wakes) == 1
            return self._subscribe(key, first=first)

    def _leave(self, key: bytes, wake: Wake) -> None:
        with self._ordering:
            with self._mutex:
                wakes = self._wakes.get(key, [])
                if wake not in wakes:
                    return  # cancelled before it joined
                wakes.remove(wake)
                if wakes:
                    return
                del self._wakes[key]
                last = not self._wakes
            self._unsubscribe(key, last=last)
