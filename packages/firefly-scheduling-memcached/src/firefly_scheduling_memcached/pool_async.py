"""Connections to one memcached server, and the small bounded pool that lends them.

Written once, for asyncio streams, in `pool_async.py`; the blocking-socket twin
in `pool.py` is generated from it by `tools/async_to_sync.py`. What is said on
the wire, and how replies are read, is `protocol`'s business: a connection only
writes a request and feeds what comes back to its `ReplyParser`.

The pool's rules, for both flavours:

* At most `size` connections are open at once; a caller beyond that waits for one
  to come back (concurrent coroutines or threads share the pool, and an operation
  holds one connection for all of its round trips).
* Connections open on demand and are reused last-in first-out, so a quiet process
  keeps one warm connection rather than `size` of them.
* A connection that failed, timed out or was cancelled mid-exchange may hold half a
  reply: it is discarded, never lent again. A clean `SERVER_ERROR` leaves it in step.
* Before a connection is lent, it is checked for an end-of-file (a restarted server,
  a firewall closing idle connections): such a one is replaced, so the exchange that
  follows does not fail for a reason already known.
* After `os.fork()`, the child must not speak on the parent's sockets (both
  processes would read each other's replies): a pool used in a new process forgets
  the inherited connections without shutting them down and opens its own.
* asyncio: a pool serves one event loop at a time; used from a new one (a second
  `asyncio.run`), it forgets the finished loop's connections. Each loan must end
  within the pool's `timeout`, enforced by one watchdog timer per connection.
"""

# async-to-sync: rename AsyncConnection Connection
# async-to-sync: rename AsyncPool Pool
# async-to-sync: rename asyncio.Semaphore threading.Semaphore

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
import threading
import time
from typing import Final

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling_memcached.protocol import Request
from firefly_scheduling_memcached.replies import Reply, ReplyParser

#: Bytes asked of the socket per read; a lock's replies are far smaller.
RECEIVE_SIZE: Final = 65536
#: asyncio: an idle connection is also polled for an end-of-file only when it rested
#: this long (seconds). The event loop watches every socket it holds, and notices a
#: closed one within an iteration; a poll, one system call per operation, only covers
#: an event loop that was blocked meanwhile (and costs the asyncio lock a sixth of
#: its speed on a busy machine when done every time).
LOOP_NOTICES_WITHIN: Final = 0.1


class _Forks:
    """How many times this process is a fork child of the one that imported us.

    Counted by an `os.register_at_fork` hook, so checking for a fork costs no system
    call (`os.getpid` is one).
    """

    count = 0


def _count_fork() -> None:
    _Forks.count += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


class AsyncConnection:
    """One TCP connection to memcached, with the parser of its replies."""

    if ASYNC:

        def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._reader = reader
            self._writer = writer
            self._fileno: int = writer.get_extra_info("socket").fileno()
            self._replies = ReplyParser()
            self._loop = asyncio.get_running_loop()
            self.idle_since = 0.0
            # The loan's deadline (event-loop time) and its watchdog; see `lend`.
            self._busy = False
            self._deadline = 0.0
            self._watchdog: asyncio.TimerHandle | None = None
            self._timed_out = False

        def lend(self, seconds: float) -> None:
            """Start a loan that must end within `seconds`, else the connection is aborted.

            One watchdog timer per connection, not one per operation: it is armed
            for the first loan's deadline and, when it fires during a later loan,
            re-armed for that loan's deadline. Loans last microseconds, so the timer
            fires about once per timeout while the connection is busy, and a loan
            costs two assignments instead of scheduling and cancelling a timer.
            """
            self._busy = True
            self._deadline = self._loop.time() + seconds
            if self._watchdog is None:
                self._watchdog = self._loop.call_at(self._deadline, self._watch)

        def end_loan(self) -> None:
            self._busy = False

        def _watch(self) -> None:
            self._watchdog = None
            if not self._busy:
                return
            if self._loop.time() < self._deadline:
                self._watchdog = self._loop.call_at(self._deadline, self._watch)
                return
            # Abort: the pending read ends at once, and `exchange` raises TimeoutError.
            self._timed_out = True
            self._writer.transport.abort()

    else:

        def __init__(self, sock: socket.socket) -> None:
            self._sock = sock
            self._fileno = sock.fileno()
            self._replies = ReplyParser()

    @classmethod
    async def open(
        cls, server: tuple[str, int], *, connect_timeout: float, timeout: float
    ) -> AsyncConnection:
        """Connect within `connect_timeout` seconds.

        A blocking socket then bounds each send and each read by `timeout`; an
        asyncio connection bounds each loan (all the round trips of one operation).
        """
        host, port = server
        if ASYNC:
            # asyncio sets TCP_NODELAY on every TCP stream it opens.
            async with asyncio.timeout(connect_timeout):
                reader, writer = await asyncio.open_connection(host, port)
        else:
            sock = socket.create_connection((host, port), timeout=connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(timeout)
        return cls(reader, writer)  # sync: return cls(sock)

    async def exchange(self, request: Request) -> list[Reply]:
        """Send `request` in one write and return its replies, in order."""
        if ASYNC:
            # A few hundred bytes at most: the transport writes them at once, no drain.
            self._writer.write(request.data)
        else:
            self._sock.sendall(request.data)
        parser = self._replies
        replies: list[Reply] = []
        while True:
            reply = parser.next_reply()
            if reply is None:
                if ASYNC:
                    data = await self._reader.read(RECEIVE_SIZE)
                    if not data and self._timed_out:
                        raise TimeoutError("memcached did not answer in time")
                else:
                    data = self._sock.recv(RECEIVE_SIZE)
                if not data:
                    raise ConnectionResetError("memcached closed the connection mid-reply")
                parser.feed(data)
                continue
            replies.append(reply)
            if len(replies) == request.replies:
                return replies

    def closed_by_server(self) -> bool:
        """Whether the socket is readable before anything was asked: an end-of-file.

        Or stray bytes, which would be taken for the next reply; either way the
        connection is not fit for use. One `select` with no wait: a few microseconds.
        asyncio: the event loop has seen it already unless it was blocked since the
        connection came back (see `LOOP_NOTICES_WITHIN`).
        """
        if ASYNC:
            # Check these first: asyncio closes the socket once it saw the end.
            if self._writer.is_closing() or self._reader.at_eof():
                return True
            if time.monotonic() - self.idle_since < LOOP_NOTICES_WITHIN:
                return False
        return bool(select.select([self._fileno], [], [], 0)[0])

    def discard(self) -> None:
        """Close at once, without waiting: what the connection holds is not wanted."""
        if ASYNC:
            self._writer.transport.abort()
        else:
            self._sock.close()

    async def close(self) -> None:
        """Close cleanly (asyncio: wait until the transport is gone)."""
        if ASYNC:
            self._writer.close()
            with contextlib.suppress(OSError):  # the server went first; closed either way
                await self._writer.wait_closed()
        else:
            self._sock.close()


class AsyncPool:
    """At most `size` connections to `server`, each lent to one operation at a time."""

    def __init__(
        self, server: tuple[str, int], *, size: int, connect_timeout: float, timeout: float
    ) -> None:
        self.server = server
        self.size = size
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self._idle: list[AsyncConnection] = []
        self._slots = asyncio.Semaphore(size)
        self._forks = _Forks.count
        if ASYNC:
            self._loop: asyncio.AbstractEventLoop | None = None
        self._reset_mutex = threading.Lock()

    async def take(self) -> AsyncConnection:
        """A connection for one operation; hand it back with `give_back` or `discard`.

        asyncio: the loan must end within `timeout` seconds, else the connection is
        aborted and its pending read raises `TimeoutError` (a blocking socket has
        its own timeout for each send and read).
        """
        if not self._ours():
            self._adopt()
        await self._slots.acquire()
        connection = self._idle_connection()
        if connection is None:
            try:
                connection = await AsyncConnection.open(
                    self.server, connect_timeout=self.connect_timeout, timeout=self.timeout
                )
            except BaseException:
                self._slots.release()
                raise
        if ASYNC:
            connection.lend(self.timeout)
        return connection

    def give_back(self, connection: AsyncConnection) -> None:
        """Return a connection whose last exchange ended cleanly."""
        if ASYNC:
            connection.end_loan()
            connection.idle_since = time.monotonic()
        self._idle.append(connection)
        self._slots.release()

    def discard(self, connection: AsyncConnection) -> None:
        """Close a connection that failed or was interrupted; its slot is free again."""
        try:
            if ASYNC:
                connection.end_loan()
            connection.discard()
        finally:
            self._slots.release()

    def _idle_connection(self) -> AsyncConnection | None:
        """An idle connection still fit for use, or None; the unfit ones are closed."""
        while self._idle:
            try:
                connection = self._idle.pop()
            except IndexError:  # another thread took the last one meanwhile
                return None
            if not connection.closed_by_server():
                return connection
            connection.discard()
        return None

    async def close(self) -> None:
        """Close the idle connections; the pool opens new ones if it is used again."""
        if not self._ours():
            return  # inherited or from another event loop: not ours to close
        while self._idle:
            try:
                connection = self._idle.pop()
            except IndexError:
                break
            await connection.close()

    def _ours(self) -> bool:
        """Whether the idle connections may serve this call: same process (and loop).

        No system call: `asyncio.get_running_loop` makes one in Python 3.11 (it
        compares process ids). A thread runs one event loop at a time, so a pool
        whose loop no longer runs belongs to a finished loop.
        """
        if ASYNC:
            loop = self._loop
            if loop is None or not loop.is_running():
                return False
        return self._forks == _Forks.count

    def _adopt(self) -> None:
        """Make the pool this process's (and event loop's), forgetting older connections.

        In a forked child, the inherited connections are the parent's: the child must
        not speak on them, nor shut them down. They are only forgotten (asyncio: the
        transports are left alone, since their event loop's selector is shared with
        the parent) or their descriptor closed (sockets: the parent's stays open).
        Connections of a finished event loop cannot serve a new one either. A fresh
        semaphore, too: the old one may count slots held by threads of the parent,
        or be bound to the old event loop.
        """
        with self._reset_mutex:
            if self._ours():
                return
            inherited, self._idle = self._idle, []
            self._slots = asyncio.Semaphore(self.size)
            self._forks = _Forks.count
            if ASYNC:
                self._loop = asyncio.get_running_loop()
        if ASYNC:
            del inherited  # see above: dropped, never touched
        else:
            for connection in inherited:
                connection.discard()
