"""A TCP proxy to PostgreSQL that counts the statements its clients send, per client.

`fire_cost.py --modes insert atomic` asks how many statements `current_fire().atomic`
adds to the task's own transaction. The count is taken on the wire, where neither
the library nor the drivers can misreport it: every message a client sends after its
startup is read (type byte, length), and each simple-protocol `Query` (`Q`) and each
extended-protocol `Execute` (`E`) is one statement, `BEGIN` and `COMMIT` included.
Counts are kept by the connection's `application_name` (read from its startup
message), so the task's connections are told apart from the node's lock and history
connections through the same proxy. Transactions are told apart by the server's own
`ReadyForQuery` (`Z`) status: a connection's statements since it was last idle make
one transaction when the server reports it idle again (`I`), so `transactions()`
says how many statements each transaction held. The bytes are forwarded unchanged.

Clients must connect with `sslmode=disable` (an encrypted stream cannot be read);
the SSL and GSS requests of a client that tries them first are passed through, and
the server's refusal with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections import Counter
from collections.abc import Callable

#: Startup codes of the requests that come before the real startup message.
_SSL_REQUEST, _GSS_REQUEST, _CANCEL_REQUEST = 80877103, 80877104, 80877102
_STATEMENTS = frozenset(b"QE")
_CHUNK = 65536


class _ClientStream:
    """Reads one client's messages as they pass, counting its statements."""

    def __init__(self, counts: Counter[str], mutex: threading.Lock) -> None:
        self._counts = counts
        self._mutex = mutex
        self._buffer = b""
        self._started = False
        self.application = ""
        #: Statements sent since the server last reported the connection idle.
        self.pending = 0
        #: The server owes a one-byte answer to an SSL or GSS request.
        self.awaiting_answer = False

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while True:
            if not self._started:
                if len(self._buffer) < 8:
                    return
                (length,) = struct.unpack("!i", self._buffer[:4])
                if len(self._buffer) < length:
                    return
                message, self._buffer = self._buffer[:length], self._buffer[length:]
                (code,) = struct.unpack("!i", message[4:8])
                if code in {_SSL_REQUEST, _GSS_REQUEST}:
                    self.awaiting_answer = True
                elif code != _CANCEL_REQUEST:
                    self._started = True
                    self.application = _application_name(message[8:])
                continue
            if len(self._buffer) < 5:
                return
            (length,) = struct.unpack("!i", self._buffer[1:5])
            if len(self._buffer) < length + 1:
                return
            kind = self._buffer[0]
            self._buffer = self._buffer[length + 1 :]
            if kind in _STATEMENTS:
                with self._mutex:
                    self._counts[self.application] += 1
                    self.pending += 1


class _ServerStream:
    """Reads the server's messages to one client: each `ReadyForQuery` that reports
    the connection idle closes a transaction of the client's pending statements."""

    def __init__(
        self, client: _ClientStream, transactions: Counter[tuple[str, int]], mutex: threading.Lock
    ) -> None:
        self._client = client
        self._transactions = transactions
        self._mutex = mutex
        self._buffer = b""

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while True:
            if self._client.awaiting_answer:
                if not self._buffer:
                    return
                self._client.awaiting_answer = False
                self._buffer = self._buffer[1:]  # 'N' (refused: the stream stays plain)
                continue
            if len(self._buffer) < 5:
                return
            (length,) = struct.unpack("!i", self._buffer[1:5])
            if len(self._buffer) < length + 1:
                return
            kind, status = self._buffer[0], self._buffer[5:6]
            self._buffer = self._buffer[length + 1 :]
            if kind == ord("Z") and status == b"I":
                with self._mutex:
                    client = self._client
                    if client.pending:
                        self._transactions[(client.application, client.pending)] += 1
                    client.pending = 0


def _application_name(parameters: bytes) -> str:
    """`application_name` of a startup message's `key\\0value\\0` pairs ('' without)."""
    fields = parameters.split(b"\0")
    pairs = dict(zip(fields[0::2], fields[1::2], strict=False))
    return pairs.get(b"application_name", b"").decode(errors="replace")


class StatementCounter:
    """Proxies 127.0.0.1:`port` to `host`:`target_port`; `counts()` by application name."""

    def __init__(self, host: str, target_port: int) -> None:
        self._target = (host, target_port)
        self._counts: Counter[str] = Counter()
        self._transactions: Counter[tuple[str, int]] = Counter()
        self._mutex = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0

    def start(self) -> StatementCounter:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        self._server = future.result(timeout=10)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        client = _ClientStream(self._counts, self._mutex)
        server = _ServerStream(client, self._transactions, self._mutex)
        await asyncio.gather(
            _pipe(reader, up_writer, client.feed), _pipe(up_reader, writer, server.feed)
        )

    def counts(self) -> Counter[str]:
        """Statements sent so far, by the sending connection's `application_name`."""
        with self._mutex:
            return Counter(self._counts)

    def transactions(self) -> Counter[tuple[str, int]]:
        """Transactions ended so far, by (`application_name`, statements they held)."""
        with self._mutex:
            return Counter(self._transactions)

    def close(self) -> None:
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    tap: Callable[[bytes], None],
) -> None:
    try:
        while data := await reader.read(_CHUNK):
            tap(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()
