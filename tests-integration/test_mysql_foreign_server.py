"""MySqlNamedLock pointed at something that is not MySQL/MariaDB: never a raw driver error.

PostgreSQL and Redis wait for the client to speak first, so no MySQL greeting ever
arrives: that is a bounded `LockBackendError` (an overloaded MySQL looks the same, so it
cannot be called a configuration error). A server that greets with something else is
unmistakably not MySQL: a `ConfigurationError`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pymysql
import pytest

from firefly_scheduling import ConfigurationError, LockBackendError
from firefly_scheduling_mysql import MySqlNamedLock

PASSWORD = "foreign-server-secret"


def _address(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


@pytest.mark.parametrize("server", ["postgres_url", "redis_url"])
def test_a_server_that_never_greets_is_a_bounded_backend_error(
    server: str, request: pytest.FixtureRequest
) -> None:
    address = _address(request.getfixturevalue(server))
    lock = MySqlNamedLock(f"mysql://app:{PASSWORD}@{address}/app?read_timeout=1")
    started = time.monotonic()
    with pytest.raises(LockBackendError, match=r"no MySQL greeting \(waited up to 1 s\)") as caught:
        lock.try_acquire("report", 30)
    assert time.monotonic() - started < 5, "a silent server must not hang the acquire"
    assert isinstance(caught.value.__cause__, pymysql.err.OperationalError)
    assert PASSWORD not in str(caught.value)
    lock.release("report")
    lock.close()


@pytest.fixture
def banner_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """A local server that greets every connection with `request.param`, then hangs up."""
    banner: bytes = request.param
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        deadline = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            with client:
                client.sendall(banner)
                client.settimeout(1)
                with contextlib.suppress(OSError):  # the client may hang up first
                    client.recv(1024)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    listener.close()


@pytest.mark.parametrize(
    "banner_server",
    [b"SSH-2.0-OpenSSH_9.2\r\n", b"220 mail.example ESMTP\r\n", b"\x05\x00\x00\x00\x09abcd"],
    ids=["ssh", "smtp", "truncated-handshake"],
    indirect=True,
)
def test_a_server_greeting_in_another_protocol_is_a_configuration_error(
    banner_server: str,
) -> None:
    lock = MySqlNamedLock(f"mysql://app:{PASSWORD}@{banner_server}/app")
    with pytest.raises(ConfigurationError, match="greeting is not MySQL's") as caught:
        lock.try_acquire("report", 30)
    message = str(caught.value)
    assert "mysql lock provider" in message
    assert PASSWORD not in message
    assert lock.is_held("report") is False
    lock.close()
