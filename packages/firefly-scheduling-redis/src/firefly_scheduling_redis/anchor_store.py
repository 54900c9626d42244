"""`RedisAnchorStore`: initial-delay anchors in Redis (entry point `redis`).

`add` is `SET key value NX`, `replace` a compare-and-set Lua script, and `now` the
server's `TIME`, so anchors are written and measured on one clock whatever the skew
between nodes. Anchors have no expiry. On a Redis configured to evict keys
(`maxmemory-policy` other than `noeviction`/`volatile-*`) an evicted anchor re-arms
the window.
"""

from __future__ import annotations

from typing import ClassVar, Final

import redis

from firefly_scheduling.initial_delay.base import BaseAnchorStore
from firefly_scheduling.locks.connection_url import parse_lock_url
from firefly_scheduling.locks.redaction import redact_url, url_secrets

URL_SCHEMES: Final = ("redis", "rediss", "unix")
#: Seconds. A gate check must never hang a fire on a silent server.
TIMEOUT_SECONDS: Final = 5.0


class RedisAnchorStore(BaseAnchorStore):
    """Anchors as plain Redis strings, shared by every process that reaches the server."""

    store_name = "redis"
    shared_across_processes = True
    driver_errors = (redis.RedisError, OSError)

    # KEYS[1] = anchor key; ARGV[1] = expected value, ARGV[2] = new value.
    # Returns 1 when the key held ARGV[1] and now holds ARGV[2], otherwise 0.
    REPLACE_SCRIPT: ClassVar[str] = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2])
    return 1
end
return 0
"""

    def __init__(self, url: str) -> None:
        parse_lock_url(url, provider="redis", schemes=URL_SCHEMES)
        super().__init__(target=redact_url(url), secrets=url_secrets(url))
        self._client: redis.Redis = redis.Redis.from_url(
            url,
            socket_timeout=TIMEOUT_SECONDS,
            socket_connect_timeout=TIMEOUT_SECONDS,
            decode_responses=True,
        )
        self._replace_script = self._client.register_script(self.REPLACE_SCRIPT)

    def _add(self, key: str, value: str) -> bool:
        return bool(self._client.set(key, value, nx=True))

    def _get(self, key: str) -> str | None:
        value = self._client.get(key)
        return None if value is None else str(value)

    def _replace(self, key: str, expected: str, value: str) -> bool:
        return bool(self._replace_script(keys=[key], args=[expected, value]))

    def _now(self) -> float:
        seconds, microseconds = self._client.time()
        return float(seconds) + float(microseconds) / 1_000_000

    def _close(self) -> None:
        self._client.close()


def create_anchor_store(url: str) -> RedisAnchorStore:
    """The `anchor_store` factory of this provider's descriptor (`provider.py`)."""
    return RedisAnchorStore(url)
