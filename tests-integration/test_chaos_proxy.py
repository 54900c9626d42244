"""The fault checker's proxy resets exactly the connections a blackhole took data from.

Found with seed 120402: the proxy chose the connections to reset at a blackhole's
end from a snapshot taken as it began. A connection whose upstream was still being
opened then was missing from it: its requests were dropped, it was never reset, and
its client waited for a reply that could not come. The proxy now decides at the end,
from the drops themselves, so the rule is "lost data, reset", whatever the timing:
a connection that lost data is reset, and an idle one, which lost nothing, lives on
(as it would through a real outage shorter than TCP's timeouts).

Real sockets on 127.0.0.1: an echo server, the proxy in front of it, two clients.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from chaos_harness.proxy import FaultyProxy

BLACKHOLE_SECONDS = 0.5


@pytest.fixture
def echo_port() -> Iterator[int]:
    """A server on 127.0.0.1 that sends back whatever each connection sends it."""
    listener = socket.create_server(("127.0.0.1", 0))
    stopping = threading.Event()

    def echo(connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):  # the proxy resets some: expected
            while data := connection.recv(4096):
                connection.sendall(data)

    def serve() -> None:
        listener.settimeout(0.1)
        while not stopping.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=echo, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stopping.set()
        thread.join(5)
        listener.close()


def _round_trip(client: socket.socket, data: bytes) -> bytes:
    client.sendall(data)
    return client.recv(4096)


def _ended(client: socket.socket) -> bool:
    """Whether the proxy ended `client`'s connection (a reset, or a close)."""
    try:
        return client.recv(4096) == b""
    except (ConnectionResetError, ConnectionAbortedError):
        return True


def test_a_blackhole_resets_the_connections_it_took_data_from_and_no_other(
    echo_port: int,
) -> None:
    proxy = FaultyProxy("127.0.0.1", echo_port).start()
    try:
        talking = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        idle = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        assert _round_trip(talking, b"before") == b"before"
        assert _round_trip(idle, b"before") == b"before"
        proxy.blackhole(BLACKHOLE_SECONDS)
        talking.sendall(b"lost")  # dropped by the blackhole
        time.sleep(BLACKHOLE_SECONDS + 0.5)
        # The connection that lost its request is reset: its client learns at once.
        assert _ended(talking), "the connection that lost data was not reset"
        # The idle one lost nothing and still works.
        assert _round_trip(idle, b"after") == b"after"
        talking.close()
        idle.close()
    finally:
        proxy.close()
