"""`RedisAnchorStore`: initial-delay anchors in Redis or Redis Cluster (entry point `redis`).

`add` is `SET key value NX`, `replace` a compare-and-set Lua script, and `now` the
server's `TIME`, so anchors are written and measured on one clock whatever the skew
between nodes. On a Redis Cluster every operation touches one key (no hash tag is
needed), and `TIME` is always read from the primary that owns the slot of one fixed
key, so every node of the fleet reads the same clock. Anchors have no expiry. On a
Redis configured to evict keys (`maxmemory-policy` other than `noeviction`/`volatile-*`)
an evicted anchor re-arms the window.
"""

from __future__ import annotations

import threading
from typing import ClassVar, Final

import redis
import redis.cluster
from redis.exceptions import RedisClusterException

from firefly_scheduling.concurrency.pool_gate import PoolGate, gated
from firefly_scheduling.initial_delay.base import BaseAnchorStore
from firefly_scheduling_redis.client import (
    check_flavour,
    client_secrets,
    close_built_client,
    describe_client,
    is_cluster,
)
from firefly_scheduling_redis.url import URL_SCHEMES, ServerUrl, parse_url, pool_size_of

__all__ = ["URL_SCHEMES", "RedisAnchorStore", "create_anchor_store"]

#: Seconds. A gate check must never hang a fire on a silent server.
TIMEOUT_SECONDS: Final = 5.0
#: On a cluster, `TIME` is read from the primary owning this key's slot.
CLOCK_KEY: Final = "firefly:scheduling:anchor-clock"

Client = redis.Redis | redis.cluster.RedisCluster


class RedisAnchorStore(BaseAnchorStore):
    """Anchors as plain Redis strings, shared by every process that reaches the server.

    `url_or_client` is a URL the redis lock accepts (`redis+cluster://` included) or a
    synchronous `redis.Redis` / `redis.cluster.RedisCluster` client, used as it is and
    left open. A cluster client from a URL is built on first use, so construction
    never connects. A client from a URL opens at most `pool_size` connections (to
    each node, on a cluster), as the lock's does: the argument, else `?pool_size=` of
    the URL, else 4; callers beyond it wait up to `TIMEOUT_SECONDS` for one.
    """

    store_name = "redis"
    shared_across_processes = True
    driver_errors = (redis.RedisError, RedisClusterException, OSError)

    # KEYS[1] = anchor key; ARGV[1] = expected value, ARGV[2] = new value.
    # Returns 1 when the key held ARGV[1] and now holds ARGV[2], otherwise 0.
    REPLACE_SCRIPT: ClassVar[str] = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2])
    return 1
end
return 0
"""

    def __init__(self, url_or_client: str | Client, *, pool_size: int | None = None) -> None:
        self._server: ServerUrl | None = None
        self._client: Client | None = None
        self._connecting = threading.Lock()
        #: The bound on the connections of a client built from a URL; None on the caller's.
        self.pool_size: int | None = None
        self._gate: PoolGate | None = None
        if isinstance(url_or_client, str):
            self._server = parse_url(url_or_client)
            super().__init__(target=self._server.shown, secrets=self._server.secrets)
            self.pool_size = pool_size_of(self._server, pool_size, owner=_STORE_NAME)
            self._gate = PoolGate(self.pool_size, wait_seconds=TIMEOUT_SECONDS)
            self._cluster = self._server.cluster
        else:
            check_flavour(url_or_client, asyncio=False)
            pool_size_of(None, pool_size, owner=_STORE_NAME)  # refused with a client
            super().__init__(
                target=describe_client(url_or_client), secrets=client_secrets(url_or_client)
            )
            self._client = url_or_client
            self._cluster = is_cluster(url_or_client)

    def _add(self, key: str, value: str) -> bool:
        with gated(self._gate):
            return bool(self._redis().set(key, value, nx=True))

    def _get(self, key: str) -> str | None:
        with gated(self._gate):
            value = self._redis().get(key)
        return _text(value)

    def _replace(self, key: str, expected: str, value: str) -> bool:
        # Registering hashes the script and sends nothing; replacements are rare.
        with gated(self._gate):
            script = self._redis().register_script(self.REPLACE_SCRIPT)
            return bool(script(keys=[key], args=[expected, value]))

    def _now(self) -> float:
        with gated(self._gate):
            client = self._redis()
            if isinstance(client, redis.cluster.RedisCluster):
                clock = client.get_node_from_key(CLOCK_KEY)  # type: ignore[no-untyped-call]
                seconds, microseconds = client.time(target_nodes=clock)
            else:
                seconds, microseconds = client.time()
        return float(seconds) + float(microseconds) / 1_000_000

    def _close(self) -> None:
        if self._server is not None and self._client is not None:
            close_built_client(self._client)

    def _redis(self) -> Client:
        """The client; one built from a URL is built here, on first use."""
        client = self._client
        if client is None:
            with self._connecting:
                if self._client is None and self._server is not None:
                    self._client = _client_from_url(self._server, self.pool_size)
                client = self._client
            if client is None:  # pragma: no cover - a URL or a client is always given
                raise AssertionError("RedisAnchorStore has neither a client nor a URL")
        return client


_STORE_NAME = "the redis anchor store"


def _client_from_url(server: ServerUrl, pool_size: int | None) -> Client:
    options = {
        "socket_timeout": TIMEOUT_SECONDS,
        "socket_connect_timeout": TIMEOUT_SECONDS,
        "decode_responses": True,
        "max_connections": pool_size,
    }
    if server.cluster:
        return redis.cluster.RedisCluster.from_url(server.driver_url, **options)
    return redis.Redis.from_url(server.driver_url, **options)


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def create_anchor_store(url: str) -> RedisAnchorStore:
    """The `anchor_store` factory of this provider's descriptor (`provider.py`)."""
    return RedisAnchorStore(url)
