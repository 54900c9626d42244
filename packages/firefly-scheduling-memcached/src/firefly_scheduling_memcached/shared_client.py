"""One pymemcache connection for many threads, safe across `fork` (lock and anchor store).

pymemcache's `Client` is one socket and no mutex: two threads using it at once
interleave their commands and read each other's replies (8 threads sharing the
anchor store's client raised raw `AttributeError`s and `KeyError`s from inside
pymemcache). `SharedClient` serialises every exchange behind a mutex; one exchange
is a few hundred microseconds on a local server, and a pooled client measured
slower for the short exchanges a lock makes.

Before each exchange, a socket the server closed meanwhile (a restart, an idle
timeout) is dropped so that the exchange reconnects instead of failing. In a forked
child (`firefly_scheduling.concurrency.forks`), the parent's socket is dropped without a word
to the server and the mutex replaced: the child connects anew on first use.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pymemcache.client.base import Client

from firefly_scheduling.concurrency.forks import reset_in_forked_child


def drop_if_closed(client: Client) -> Client:
    """`client`, its connection dropped first if the server closed it meanwhile.

    A socket that is readable before we sent anything holds an end-of-file (or
    stray bytes): close it, and the client reconnects for the next exchange. The
    caller serialises access to `client`.
    """
    sock = client.sock
    if sock is not None and select.select([sock], [], [], 0)[0]:
        client.close()
    return client


class SharedClient:
    """A pymemcache `Client` used by one thread at a time, reset in a forked child."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._mutex = threading.Lock()
        reset_in_forked_child(self, SharedClient._after_fork_in_child)

    @property
    def client(self) -> Client:
        """The underlying client, to read its settings; do I/O through `exchange` only."""
        return self._client

    @contextmanager
    def exchange(self) -> Iterator[Client]:
        """The connected client, held for the caller's whole exchange (e.g. `gets` + `cas`)."""
        with self._mutex:
            yield drop_if_closed(self._client)

    def close(self) -> None:
        with self._mutex:
            self._client.close()

    def _after_fork_in_child(self) -> None:
        # Closing the child's copy of the descriptor sends nothing: the parent still has it.
        self._mutex = threading.Lock()
        self._client.close()
