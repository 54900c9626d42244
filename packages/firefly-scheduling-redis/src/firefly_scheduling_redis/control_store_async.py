"""`AsyncRedisControlStore`: control records in Redis or Redis Cluster.

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

# async-to-sync: rename AsyncRedisControlStore RedisControlStore
# async-to-sync: rename AsyncControlStore ControlStore
# async-to-sync: rename redis.asyncio.Redis redis.Redis
# async-to-sync: rename redis.asyncio.RedisCluster redis.cluster.RedisCluster
# async-to-sync: rename redis.asyncio.retry.Retry redis.retry.Retry
# async-to-sync: rename AsyncPoolGate PoolGate

from __future__ import annotations

import asyncio  # sync: import threading
from typing import Final

import redis.asyncio  # sync: import redis
import redis.asyncio.cluster  # sync: import redis.cluster
import redis.asyncio.retry  # sync: import redis.retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException, RedisError

from firefly_scheduling.concurrency.pool_gate_async import AsyncPoolGate, gated
from firefly_scheduling.control.records import RecordKind
from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_redis.url import (
    CLIENT_DEFAULTS,
    POOL_WAIT_SECONDS,
    ServerUrl,
    parse_url,
)

# sync: from firefly_scheduling_redis.client import close_built_client

#: The prefix of the hashes when none is given.
DEFAULT_PREFIX: Final = "firefly:scheduling"
#: Connections a store opens at most (each node's, on a cluster): operator commands
#: and one pause check per claim are rare next to the lock's traffic.
POOL_SIZE: Final = 2

# KEYS[1] = a hash of the prefix (routes the script); returns the server's TIME.
_TIME_SCRIPT: Final = "return redis.call('TIME')"

Client = redis.asyncio.Redis | redis.asyncio.RedisCluster


class AsyncRedisControlStore(AsyncControlStore):
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
        self._connecting = asyncio.Lock()  # sync: self._connecting = threading.Lock()
        # Callers beyond the pool wait here for a connection (redis-py would refuse them).
        self._gate = AsyncPoolGate(POOL_SIZE, wait_seconds=POOL_WAIT_SECONDS)

    def hash_key(self, kind: RecordKind) -> str:
        """The hash that holds the records of `kind` (all in the prefix's slot)."""
        return f"{{{self._prefix}}}:control:{kind}"

    async def _put(self, kind: RecordKind, key: str, value: str) -> None:
        async with gated(self._gate):
            client = await self._redis()
            await client.hset(self.hash_key(kind), key, value)

    async def _add(self, kind: RecordKind, key: str, value: str) -> bool:
        async with gated(self._gate):
            client = await self._redis()
            return bool(await client.hsetnx(self.hash_key(kind), key, value))

    async def _get(self, kind: RecordKind, key: str) -> str | None:
        async with gated(self._gate):
            client = await self._redis()
            value = await client.hget(self.hash_key(kind), key)
        return None if value is None else str(value)

    async def _delete(self, kind: RecordKind, key: str) -> bool:
        async with gated(self._gate):
            client = await self._redis()
            return int(await client.hdel(self.hash_key(kind), key)) == 1

    async def _values(self, kind: RecordKind) -> list[str]:
        async with gated(self._gate):
            client = await self._redis()
            return [str(value) for value in await client.hvals(self.hash_key(kind))]

    async def _now(self) -> float:
        # A script keyed by the prefix's hash runs on the primary that owns its slot, so
        # every node of the fleet reads one clock, on a cluster as on one server.
        async with gated(self._gate):
            client = await self._redis()
            seconds, microseconds = await client.eval(_TIME_SCRIPT, 1, self.hash_key("pause"))
        return float(seconds) + float(microseconds) / 1_000_000

    async def _close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()  # sync: close_built_client(client)

    async def _redis(self) -> Client:
        """The client, built on first use (a cluster's slot map read once, under a lock)."""
        client = self._client
        if client is not None:
            return client
        async with self._connecting:
            if self._client is None:
                built = _client_from_url(self._server)
                if isinstance(built, redis.asyncio.RedisCluster):  # sync: drop
                    await built.initialize()  # sync: drop
                self._client = built
            return self._client


def _client_from_url(server: ServerUrl) -> Client:
    no_retries = redis.asyncio.retry.Retry(NoBackoff(), 0)
    options = {
        **CLIENT_DEFAULTS,
        "retry": no_retries,
        "max_connections": POOL_SIZE,
        "decode_responses": True,
    }
    if server.cluster:
        return redis.asyncio.RedisCluster.from_url(server.driver_url, **options)
    return redis.asyncio.Redis.from_url(server.driver_url, **options)


def create_control_store(url: str) -> AsyncRedisControlStore:
    """The control-store factory of this provider's descriptor, of this flavour."""
    return AsyncRedisControlStore(url)
