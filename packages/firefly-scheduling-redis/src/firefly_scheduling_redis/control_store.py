# Generated from control_store_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`RedisControlStore`: control records in Redis or Redis Cluster.

Each kind of record is one hash, `{<prefix>}:control:<kind>`, a field per record:
a pause is `HSET`, a trigger, backfill or schedule `HSETNX`, a resume or a take
`HDEL` (which answers 1 to exactly one of any number of racing callers), a listing
`HVALS`. The hash tag `{<prefix>}` puts every hash of one prefix in one slot of a
Redis Cluster, so an operation that touches several kinds stays on one primary.
Times are the server's `TIME` (on a cluster, of the primary that owns the prefix's
slot), so every node stamps pauses and triggers on one clock.

Records have no expiry. On a Redis that may evict any key (`maxmemory-policy`
`allkeys-*`) a pause can be evicted: use `noeviction` or a `volatile-*` policy, as
for the lock. Written once, for asyncio; `control_store.py` is generated from it by
`tools/async_to_sync.py`.
"""

from __future__ import annotations

import threading
from typing import Final

import redis
import redis.cluster
import redis.retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException, RedisError

from firefly_scheduling.concurrency.pool_gate import PoolGate, gated
from firefly_scheduling.control.records import RecordKind
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_redis.client import close_built_client
from firefly_scheduling_redis.url import (
    CLIENT_DEFAULTS,
    POOL_WAIT_SECONDS,
    ServerUrl,
    parse_url,
)

#: The prefix of the hashes when none is given.
DEFAULT_PREFIX: Final = "firefly:scheduling"
#: Connections a store opens at most (each node's, on a cluster): operator commands
#: and one pause check per claim are rare next to the lock's traffic.
POOL_SIZE: Final = 2

# KEYS[1] = a hash of the prefix (routes the script); returns the server's TIME.
_TIME_SCRIPT: Final = "return redis.call('TIME')"

Client = redis.Redis | redis.cluster.RedisCluster


class RedisControlStore(ControlStore):
    """Control records as Redis hashes, shared by every process that reaches the server.

    `url` is a URL the redis lock accepts (`redis+cluster://` included); `prefix`
    keeps two deployments sharing a server apart. Construction does not connect.
    """

    store_name = "redis"
    driver_errors = (RedisError, RedisClusterException, OSError)

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX) -> None:
        if not prefix or "{" in prefix or "}" in prefix:
            raise ConfigurationError(
                f"a redis control store's prefix must be non-empty with no braces "
                f"(it becomes the hash tag), got {prefix!r}"
            )
        self._server: ServerUrl = parse_url(url)
        super().__init__(target=self._server.shown, secrets=self._server.secrets)
        self._prefix = prefix
        self._client: Client | None = None
        self._connecting = threading.Lock()
        # Callers beyond the pool wait here for a connection (redis-py would refuse them).
        self._gate = PoolGate(POOL_SIZE, wait_seconds=POOL_WAIT_SECONDS)

    def hash_key(self, kind: RecordKind) -> str:
        """The hash that holds the records of `kind` (all in the prefix's slot)."""
        return f"{{{self._prefix}}}:control:{kind}"

    def _put(self, kind: RecordKind, key: str, value: str) -> None:
        with gated(self._gate):
            client = self._redis()
            client.hset(self.hash_key(kind), key, value)

    def _add(self, kind: RecordKind, key: str, value: str) -> bool:
        with gated(self._gate):
            client = self._redis()
            return bool(client.hsetnx(self.hash_key(kind), key, value))

    def _get(self, kind: RecordKind, key: str) -> str | None:
        with gated(self._gate):
            client = self._redis()
            value = client.hget(self.hash_key(kind), key)
        return None if value is None else str(value)

    def _delete(self, kind: RecordKind, key: str) -> bool:
        with gated(self._gate):
            client = self._redis()
            return int(client.hdel(self.hash_key(kind), key)) == 1

    def _values(self, kind: RecordKind) -> list[str]:
        with gated(self._gate):
            client = self._redis()
            return [str(value) for value in client.hvals(self.hash_key(kind))]

    def _now(self) -> float:
        # A script keyed by the prefix's hash runs on the primary that owns its slot, so
        # every node of the fleet reads one clock, on a cluster as on one server.
        with gated(self._gate):
            client = self._redis()
            seconds, microseconds = client.eval(_TIME_SCRIPT, 1, self.hash_key("pause"))
        return float(seconds) + float(microseconds) / 1_000_000

    def _close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            close_built_client(client)

    def _redis(self) -> Client:
        """The client, built on first use (a cluster's slot map read once, under a lock)."""
        client = self._client
        if client is not None:
            return client
        with self._connecting:
            if self._client is None:
                built = _client_from_url(self._server)
                self._client = built
            return self._client


def _client_from_url(server: ServerUrl) -> Client:
    no_retries = redis.retry.Retry(NoBackoff(), 0)
    options = {
        **CLIENT_DEFAULTS,
        "retry": no_retries,
        "max_connections": POOL_SIZE,
        "decode_responses": True,
    }
    if server.cluster:
        return redis.cluster.RedisCluster.from_url(server.driver_url, **options)
    return redis.Redis.from_url(server.driver_url, **options)


def create_control_store(url: str) -> RedisControlStore:
    """The control-store factory of this provider's descriptor, of this flavour."""
    return RedisControlStore(url)
