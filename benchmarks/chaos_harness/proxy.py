"""A TCP proxy on 127.0.0.1 between one node and its server, with injectable faults.

Each node gets its own proxy, so a fault cuts one node off while the others carry
on (a partition), as Jepsen's nemeses do. The proxy runs an asyncio loop in a
daemon thread; the nemesis calls it from its own thread.

Faults:

* `latency(seconds, duration)`: every chunk, both ways, waits `seconds` first;
* `stall(duration)`: nothing is delivered for `duration`, then everything buffered
  is (a long GC pause of the network);
* `reset()`: every open connection is aborted with a TCP RST, both sides;
* `blackhole(duration)`: everything sent is dropped and new connections hang;
  at the end every connection that lost data is reset (what it lost would otherwise
  desynchronise the protocol forever). Which ones is decided at the end, from the
  drops themselves: a snapshot taken at the start missed a connection whose
  upstream was still being opened, which then lost its requests silently and was
  never reset (seed 120402);
* `lose_reply_to(marker)`: the next request whose bytes contain `marker` reaches
  the server, which applies it; its reply is dropped and the connection reset, as
  a network that fails between the server's answer and the client. The client
  cannot tell whether its request was applied.

`upstream_ports()` names the local ports of the proxy's connections to the server,
which is how the nemesis finds (and kills) only this run's server sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Coroutine
from typing import Any

_CHUNK = 65536


class _Pipe:
    """One client connection and its upstream connection."""

    def __init__(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.client = client
        self.upstream = upstream
        sockname = upstream[1].get_extra_info("sockname")
        self.upstream_port: int = sockname[1] if sockname else 0
        #: Whether a blackhole dropped data of this pipe (it is reset at the end).
        self.lost_data = False
        #: Whether the next reply to the client is lost (`FaultyProxy.lose_reply_to`).
        self.lose_reply = False

    def abort(self) -> None:
        for _, writer in (self.client, self.upstream):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


class FaultyProxy:
    """Listens on an ephemeral port of 127.0.0.1 and forwards to `host:port`."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._pipes: set[_Pipe] = set()
        self._latency = 0.0
        self._latency_until = 0.0
        self._stall_until = 0.0
        self._blackhole_until = 0.0
        self._lose_reply_marker: bytes | None = None
        #: How many replies `lose_reply_to` dropped.
        self.replies_lost = 0
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._serve, name="chaos-proxy", daemon=True)

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> FaultyProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the chaos proxy did not start")
        return self

    def close(self) -> None:
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for pipe in list(self._pipes):
            pipe.abort()

    def _call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    # -- faults ------------------------------------------------------------------

    def latency(self, seconds: float, duration: float) -> None:
        self._latency = seconds
        self._latency_until = time.monotonic() + duration

    def stall(self, duration: float) -> None:
        self._stall_until = time.monotonic() + duration

    def blackhole(self, duration: float) -> None:
        self._blackhole_until = time.monotonic() + duration
        self._loop.call_soon_threadsafe(self._end_blackhole_later, duration)

    def lose_reply_to(self, marker: bytes) -> None:
        """Drop the reply to the next request containing `marker`, then reset its connection."""
        self._lose_reply_marker = marker

    def reset(self) -> int:
        """Abort every open connection; how many there were."""
        result: int = self._call(self._reset())
        return result

    def upstream_ports(self) -> set[int]:
        return {pipe.upstream_port for pipe in list(self._pipes)}

    async def _reset(self) -> int:
        pipes = list(self._pipes)
        for pipe in pipes:
            pipe.abort()
        return len(pipes)

    def _end_blackhole_later(self, duration: float) -> None:
        def end() -> None:
            for pipe in list(self._pipes):
                if pipe.lost_data:
                    pipe.abort()

        self._loop.call_later(duration, end)

    # -- forwarding --------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while time.monotonic() < self._blackhole_until:
            await asyncio.sleep(0.05)  # the SYN went nowhere
        try:
            upstream = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pipe = _Pipe((reader, writer), upstream)
        self._pipes.add(pipe)
        try:
            await asyncio.gather(
                self._forward(reader, upstream[1], pipe, to_server=True),
                self._forward(upstream[0], writer, pipe, to_server=False),
                return_exceptions=True,
            )
        finally:
            self._pipes.discard(pipe)
            pipe.abort()

    async def _forward(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        pipe: _Pipe,
        *,
        to_server: bool,
    ) -> None:
        try:
            await self._copy(source, sink, pipe, to_server=to_server)
        except OSError:  # reset by a fault, by the peer, or at close: the pipe ends
            sink.transport.abort()

    async def _copy(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        pipe: _Pipe,
        *,
        to_server: bool,
    ) -> None:
        while True:
            data = await source.read(_CHUNK)
            if not data:
                sink.transport.abort()
                return
            marker = self._lose_reply_marker
            if to_server and marker is not None and marker in data:
                self._lose_reply_marker = None
                pipe.lose_reply = True
            elif not to_server and pipe.lose_reply:
                self.replies_lost += 1
                pipe.abort()  # the reply never reaches the client; the connection resets
                return
            if time.monotonic() < self._blackhole_until:
                pipe.lost_data = True
                continue  # dropped
            while (remaining := self._stall_until - time.monotonic()) > 0:
                await asyncio.sleep(min(remaining, 0.05))
            if time.monotonic() < self._latency_until:
                await asyncio.sleep(self._latency)
            sink.write(data)
            await sink.drain()
