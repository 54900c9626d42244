"""A fault-injecting TCP proxy (`chaos_harness.proxy.FaultyProxy`) in front of a test
server, and the server's URL through it, credentials and query kept."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from chaos_harness.proxy import FaultyProxy


@contextmanager
def proxied(url: str) -> Iterator[tuple[str, FaultyProxy]]:
    """`url` through a new proxy on 127.0.0.1, and the proxy; closed when the block ends."""
    parts = urlsplit(url)
    if parts.port is None:
        raise ValueError(f"a proxied test server needs a port in its URL, got {url!r}")
    proxy = FaultyProxy(parts.hostname or "127.0.0.1", parts.port).start()
    credentials, at, _ = parts.netloc.rpartition("@")
    netloc = f"{credentials}{at}127.0.0.1:{proxy.port}"
    try:
        yield parts._replace(netloc=netloc).geturl(), proxy
    finally:
        proxy.close()
