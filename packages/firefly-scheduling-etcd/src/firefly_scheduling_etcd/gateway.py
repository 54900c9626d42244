"""`GatewayConnection`: one connection to the member's v3 JSON gateway, for threads.

The synchronous lock lends one of these to each request, so the lock's bound on
connections is the number it builds (`pool_size`). It speaks HTTP/1.1 through the
standard library's `http.client`, not through httpx's synchronous client, which
costs several times the CPU per request (docs/backends/etcd.md), and a fire a
node runs sends four. The asyncio flavour keeps httpx (`asyncio_gateway`); the two
share the interface (`post`, `close`), and every request body and every reading of
an answer lives in `messages` and `protocol`, once.

Reuse follows httpcore's and urllib3's rule: before a request, an idle connection
that the member (or a proxy between) has closed is noticed, as its socket turns
readable at end of file, and is replaced, so a stale connection never swallows a
request. A failure during a request closes the connection: what was sent may or may
not have been applied, the protocol decides what follows (`protocol`), and nothing
here sends anything twice. Proxy variables of the environment are never read.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import ssl
from collections.abc import Iterator
from typing import ClassVar, Final

from firefly_scheduling_etcd.messages import Call, Reply, ok
from firefly_scheduling_etcd.url import EtcdUrl

_HEADERS: Final = {"Content-Type": "application/json"}


class GatewayConnection:
    """One request at a time to the member named by `member`, on one kept-alive connection.

    The URL's `timeout` bounds the connect and each read and write of a request.
    """

    #: What a request may raise besides the gateway's own error answers: protocol
    #: violations (`http.client.HTTPException`) and socket errors, TLS and timeouts
    #: included (`OSError`).
    errors: ClassVar[tuple[type[BaseException], ...]] = (http.client.HTTPException, OSError)

    def __init__(self, member: EtcdUrl, context: ssl.SSLContext | None) -> None:
        self._connection: http.client.HTTPConnection
        if context is None:
            self._connection = http.client.HTTPConnection(
                member.host, member.port, timeout=member.timeout
            )
        else:
            self._connection = http.client.HTTPSConnection(
                member.host, member.port, timeout=member.timeout, context=context
            )

    def post(self, call: Call) -> Reply:
        """Send `call`; the gateway's answer, whatever its status."""
        connection = self._connection
        if connection.sock is not None and _closed_by_peer(connection.sock):
            connection.close()  # the next request connects afresh
        try:
            if connection.sock is None:
                connection.connect()  # its failures (refused, TLS verification) are final
            try:
                connection.request("POST", call.path, body=call.body, headers=_HEADERS)
            except TimeoutError:
                raise  # a peer that reads nothing answers nothing: no second wait
            except OSError:
                # httpcore's rule: a peer may refuse a request before reading it all
                # and say why before it closes (an HTTP error answer, or TLS 1.3's
                # alert for a missing client certificate, which only arrives after
                # the client's side of the handshake is done). So a failed send is
                # followed by a read of that; with nothing to read, the read's own
                # error is raised.
                pass
            response = connection.getresponse()
            body = response.read()
        except BaseException:
            connection.close()  # never reused in an unknown state
            raise
        return Reply(response.status, body)

    def close(self) -> None:
        self._connection.close()


class WatchStream:
    """A streaming request to the gateway (a `watch`), read line by line by one thread.

    Its own connection, never one of the lock's: it stays open as long as the watch.
    Reads have no timeout (a watch may see nothing for hours); `close` from another
    thread shuts the socket down, which ends a blocked read.
    """

    def __init__(self, member: EtcdUrl, context: ssl.SSLContext | None) -> None:
        self._member, self._context = member, context
        self._connection: http.client.HTTPConnection | None = None

    def open(self, call: Call) -> None:
        """Send `call` and read the answer's head; `EtcdServerError` on an error answer."""
        member = self._member
        if self._context is None:
            connection = http.client.HTTPConnection(
                member.host, member.port, timeout=member.timeout
            )
        else:
            connection = http.client.HTTPSConnection(
                member.host, member.port, timeout=member.timeout, context=self._context
            )
        self._connection = connection
        connection.request("POST", call.path, body=call.body, headers=_HEADERS)
        response = connection.getresponse()
        if response.status != 200:
            ok(Reply(response.status, response.read()))  # raises: an error answer
        assert connection.sock is not None
        connection.sock.settimeout(None)
        self._response = response

    def lines(self) -> Iterator[bytes]:
        """The stream's lines, until it ends."""
        while line := self._response.readline():
            yield line

    def close(self) -> None:
        connection = self._connection
        if connection is None:
            return
        if connection.sock is not None:
            with contextlib.suppress(OSError):
                connection.sock.shutdown(socket.SHUT_RDWR)
        connection.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether an idle connection's socket is readable: end of file, or bytes nobody asked for.

    Either way the connection cannot carry the next request. `poll` where there is
    one: `select` refuses descriptors past FD_SETSIZE, which a busy process reaches.
    """
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)
