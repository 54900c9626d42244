"""`MemcachedAnchorStore`: initial-delay anchors in memcached (entry point `memcached`).

`add` is memcached's own add-if-absent, `replace` is `gets` + `cas`. memcached has no
cheap clock command (`stats` is a large reply with whole seconds), so anchors are
written and measured with this host's wall clock: node clock skew shifts a window by
the skew. Anchors are stored without expiry, but memcached may still evict them under
memory pressure, which re-arms the window; give memcached room, or prefer Redis or a
database for long windows.

One store is shared by every thread of a host: its connection is a `SharedClient`
(one exchange at a time; `replace`'s `gets` and `cas` in one), reset in a forked
child.
"""

from __future__ import annotations

import re
from typing import Final

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

from firefly_scheduling.initial_delay.base import BaseAnchorStore
from firefly_scheduling.locks.server_keys import ServerKeyScheme
from firefly_scheduling.urls.redaction import redact_url
from firefly_scheduling_memcached.shared_client import SharedClient
from firefly_scheduling_memcached.url import memcached_server

#: Seconds. A gate check must never hang a fire on a silent server.
TIMEOUT_SECONDS: Final = 5.0

# memcached keys: at most 250 bytes, no spaces or control characters.
_KEYS: Final = ServerKeyScheme(
    readable_prefix="",
    hashed_prefix="firefly:scheduling:initial-delay:sha256:",
    max_length=250,
    readable=re.compile(r"[!-~]+"),
)


class MemcachedAnchorStore(BaseAnchorStore):
    """Anchors as memcached items, shared by every process that reaches the server."""

    store_name = "memcached"
    shared_across_processes = True
    driver_errors = (MemcacheError, OSError)
    key_scheme = _KEYS

    def __init__(self, url: str) -> None:
        # The same URL rules as the lock: one server, no credentials, nothing else.
        server = memcached_server(url)
        super().__init__(target=redact_url(url))
        self._client = SharedClient(
            Client(server, connect_timeout=TIMEOUT_SECONDS, timeout=TIMEOUT_SECONDS)
        )

    def _add(self, key: str, value: str) -> bool:
        with self._client.exchange() as client:
            return bool(client.add(key, value.encode(), expire=0, noreply=False))

    def _get(self, key: str) -> str | None:
        with self._client.exchange() as client:
            value = client.get(key)
        return None if value is None else bytes(value).decode()

    def _replace(self, key: str, expected: str, value: str) -> bool:
        with self._client.exchange() as client:
            current, cas_token = client.gets(key)
            if current is None or bytes(current).decode() != expected:
                return False
            return bool(client.cas(key, value.encode(), cas_token, expire=0, noreply=False))

    def _close(self) -> None:
        self._client.close()


def create_anchor_store(url: str) -> MemcachedAnchorStore:
    """The `anchor_store` factory of this provider's descriptor (`provider.py`)."""
    return MemcachedAnchorStore(url)
