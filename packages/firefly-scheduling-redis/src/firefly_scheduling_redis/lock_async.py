"""`AsyncRedisLock`: a lease per name, kept as a Redis key that the server expires.

A thin driver over redis-py: the keys, the Lua scripts, the URL rules and the error
hints live in `protocol`, which both flavours use. Written once, for asyncio, in
`lock_async.py`; the synchronous `RedisLock` in `lock.py` is generated from
it by `tools/async_to_sync.py`, and the two exclude each other on the same name.

A lock is a key holding this acquisition's owner token, written with `SET NX PX`, so
Redis itself frees it when the TTL passes. Release and renewal are Lua scripts that
act only while the key still holds the token. Fencing tokens come from `INCR` of a
counter key, in the same script as the acquisition.

Limits, stated once here and in the docs page:

* One Redis server (or primary), or one Redis Cluster. Replication is asynchronous:
  a failover can promote a replica that never saw a lock just taken, and two nodes
  then hold it. Redlock (a majority of independent servers) is not implemented.
* The TTL runs on the clock of the Redis server (on a cluster: of the primary that
  owns the name's slot), not the nodes'.
* An eviction policy that may evict any key (`allkeys-*`) can evict a held lock;
  use `noeviction` or a `volatile-*` policy.
"""

# async-to-sync: rename AsyncRedisLock RedisLock
# async-to-sync: rename redis.asyncio.Redis redis.Redis
# async-to-sync: rename redis.asyncio.RedisCluster redis.cluster.RedisCluster
# async-to-sync: rename redis.asyncio.retry.Retry redis.retry.Retry
# async-to-sync: rename AsyncPoolGate PoolGate
# async-to-sync: rename AsyncGroupedCalls GroupedCalls
# async-to-sync: rename AsyncReleaseListener ReleaseListener
# async-to-sync: rename AsyncNotifiedWaiting NotifiedWaiting

from __future__ import annotations

import asyncio  # sync: import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, TypeAlias

import redis.asyncio  # sync: import redis
import redis.asyncio.cluster  # sync: import redis.cluster
import redis.asyncio.retry  # sync: import redis.retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisClusterException, RedisError

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling.concurrency.grouped_async import AsyncGroupedCalls
from firefly_scheduling.concurrency.pool_gate_async import AsyncPoolGate, gated
from firefly_scheduling.concurrency.pool_size import DEFAULT_POOL_SIZE
from firefly_scheduling.locks.holding import new_owner_token
from firefly_scheduling_redis import protocol
from firefly_scheduling_redis.client import (
    check_flavour,
    client_secrets,
    describe_client,
    is_cluster,  # sync: is_cluster, close_built_client,
)
from firefly_scheduling_redis.notified_waiting_async import AsyncNotifiedWaiting, Client
from firefly_scheduling_redis.primaries_async import send_by_primary
from firefly_scheduling_redis.release_listener_async import AsyncReleaseListener
from firefly_scheduling_redis.url import (
    CLIENT_DEFAULTS,
    POOL_WAIT_SECONDS,
    ServerUrl,
    parse_url,
    pool_size_of,
)

# Sends again, one by one, the commands at these indices that a cluster refused unrun.
if ASYNC:
    _Resend: TypeAlias = Callable[[list[int]], Awaitable[list[Any]]]
else:
    _Resend: TypeAlias = Callable[[list[int]], list[Any]]
#: The most releases one pipeline carries.
RELEASES_PER_PIPELINE = 64


class AsyncRedisLock(AsyncNotifiedWaiting):
    """A Redis lease lock per name; the server frees it when the TTL passes.

    `url_or_client` is a URL or an existing client of this flavour:

    * `redis://`, `rediss://` or `unix://` (one server), or `redis+cluster://` /
      `rediss+cluster://host:port` (a Redis Cluster, reached through that node). A
      client is built with `url.CLIENT_DEFAULTS` and no retries, and closed by
      `aclose()`. Construction checks the URL and does not connect: a cluster client,
      which discovers the slot map when it is built, is built on first use.
      It opens at most `pool_size` connections (to each node, on a cluster): the
      argument, else `?pool_size=` of the URL, else 4. Concurrent callers beyond
      that wait for one, up to `url.POOL_WAIT_SECONDS`, and then fail with a
      `LockBackendError` naming the bound.
    * a `redis.asyncio.Redis` or `redis.asyncio.RedisCluster` client, used as it is (its
      timeouts, retries and pool, so its bound, apply) and left open. `pool_size`
      cannot be given with it.

    Anything else, including a client of the other flavour, is a `ConfigurationError`
    at construction. Safe for concurrent use.
    """

    backend_name: ClassVar[str] = "redis"
    ttl_honoured: ClassVar[bool] = True
    session_scoped: ClassVar[bool] = False
    supports_fencing: ClassVar[bool] = True
    renewable: ClassVar[bool] = True
    #: One pipeline on one server; one per primary on a cluster (`primaries`).
    batch_acquires = True
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (
        RedisError,
        RedisClusterException,  # an unreachable cluster; not a RedisError
        OSError,
    )

    #: The Lua scripts (see `protocol`), as the class constants the docs name.
    RELEASE_SCRIPT: ClassVar[str] = protocol.RELEASE.source
    RENEW_SCRIPT: ClassVar[str] = protocol.RENEW.source
    ACQUIRE_FENCED_SCRIPT: ClassVar[str] = protocol.ACQUIRE_FENCED.source

    def __init__(self, url_or_client: str | Client, *, pool_size: int | None = None) -> None:
        self._server: ServerUrl | None = None
        self._given: Client | None = None
        #: The client, once ready for concurrent use (see `_connect`).
        self._client: Client | None = None
        self._connecting = asyncio.Lock()
        #: The bound on the connections of a client built from a URL; None on the caller's.
        self.pool_size: int | None = None
        self._gate: AsyncPoolGate | None = None
        if isinstance(url_or_client, str):
            self._server = parse_url(url_or_client)
            super().__init__(target=self._server.shown, secrets=self._server.secrets)
            size = pool_size_of(self._server, pool_size, owner=_LOCK_NAME)
            self.pool_size = size
            self._gate = AsyncPoolGate(size, wait_seconds=POOL_WAIT_SECONDS)
            self._cluster = self._server.cluster
            if not self._cluster:
                self._client = _client_from_url(self._server, size)
        else:
            flavour_is_asyncio = ASYNC  # sync: flavour_is_asyncio = False
            check_flavour(url_or_client, asyncio=flavour_is_asyncio)
            pool_size_of(None, pool_size, owner=_LOCK_NAME)  # refused with a client
            super().__init__(
                target=describe_client(url_or_client), secrets=client_secrets(url_or_client)
            )
            self._cluster = is_cluster(url_or_client)
            self._given = url_or_client
            if not self._cluster:
                self._client = url_or_client
        #: The waiters' one subscriber connection (`_release_signal`).
        self._listener = AsyncReleaseListener(self._subscriber)
        #: Releases waiting for one another, sent as one pipeline (`_release_together`).
        self._releases: AsyncGroupedCalls[tuple[str, str], bool | BaseException] = (
            AsyncGroupedCalls(self._release_together, most=RELEASES_PER_PIPELINE)
        )

    @staticmethod
    def key(name: str) -> bytes:
        """The key of the lock `name` on one server: the prefix and the name as UTF-8."""
        return protocol.lock_key(name, cluster=False)

    @staticmethod
    def fence_key(name: str) -> bytes:
        """The key of the fencing counter of `name` on one server; it never expires."""
        return protocol.fence_key(name, cluster=False)

    # -- AsyncBaseLock hooks (waiting ones: `AsyncNotifiedWaiting`) -----------------------

    async def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        key = protocol.lock_key(name, cluster=self._cluster)
        ttl = protocol.milliseconds(ttl_seconds)
        async with gated(self._gate):
            return bool(await (await self._redis()).set(key, owner, nx=True, px=ttl))

    async def _claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | BaseException]:
        """Every claim's `SET NX PX` (a throwaway owner) as one batch: see `_acquire_many`."""
        requests = [(name, new_owner_token(), seconds) for name, seconds in claims]
        replies = await self._acquire_many(requests, fenced=False)
        return [reply if isinstance(reply, BaseException) else bool(reply) for reply in replies]

    async def _acquire_many(
        self, requests: Sequence[tuple[str, str, float]], *, fenced: bool
    ) -> list[int | bool | BaseException | None]:
        """Every acquisition as one batch: one pipeline on one server, one per primary
        on a cluster (`primaries`), no transaction.

        Fenced, each is the acquisition script, as `_acquire_fenced` sends it, else
        `SET NX PX`. A command's error is that acquisition's answer; a connection
        lost mid-pipeline fails its commands (unknown). The ones the server refused
        without running them (NOSCRIPT; on a cluster also MOVED, ASK, TRYAGAIN) are
        sent again: on one server once the script is loaded, on a cluster one by one
        through the cluster client, which follows the redirection.
        """
        commands = [
            protocol.acquisition(name, owner, ttl, fenced=fenced, cluster=self._cluster)
            for name, owner, ttl in requests
        ]
        if self._cluster:

            async def resend(refused: list[int]) -> list[Any]:
                requests_again = [requests[i] for i in refused]
                return list(
                    await super(AsyncRedisLock, self)._acquire_many(requests_again, fenced=fenced)
                )

            replies = await self._by_primary(commands, resend)
        else:
            replies = await self._pipelined(commands)
        if fenced:
            return [
                reply if reply is None or isinstance(reply, BaseException) else int(reply)
                for reply in replies
            ]
        return [reply if isinstance(reply, BaseException) else bool(reply) for reply in replies]

    async def _pipelined(self, commands: Sequence[protocol.Command]) -> list[Any]:
        """One server: one pipeline, and the commands that found no script once more."""
        async with gated(self._gate):
            client = await self._redis()
            replies = await _pipeline(client, commands)
            forgotten = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
            if forgotten:
                for script in {commands[i].script for i in forgotten}:
                    if script is not None:
                        await client.script_load(script.source)
                again = await _pipeline(client, [commands[i] for i in forgotten])
                for i, reply in zip(forgotten, again, strict=True):
                    replies[i] = reply
        return replies

    async def _by_primary(self, commands: Sequence[protocol.Command], resend: _Resend) -> list[Any]:
        """A cluster: one pipeline per primary; then `resend`, one by one through the
        cluster client, of the commands refused unrun (`protocol.NOT_RUN`). The
        pipelines hold one slot of the gate (one connection per primary at a time);
        each command sent again takes its own, as a single call does."""
        async with gated(self._gate):
            client = await self._redis()  # a cluster lock's client is a cluster client
            assert isinstance(client, redis.asyncio.RedisCluster)
            replies = await send_by_primary(client, commands)
        refused = [i for i, reply in enumerate(replies) if isinstance(reply, protocol.NOT_RUN)]
        if refused:
            again = await resend(refused)
            for i, reply in zip(refused, again, strict=True):
                replies[i] = reply
        return replies

    async def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        keys = (
            protocol.lock_key(name, cluster=self._cluster),
            protocol.fence_key(name, cluster=self._cluster),
        )
        ttl = protocol.milliseconds(ttl_seconds)
        token = await self._eval(protocol.ACQUIRE_FENCED, keys, (owner, ttl))
        return None if token is None else int(token)

    async def _release(self, name: str, owner: str) -> bool:
        answer = await self._releases.call((name, owner))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def _release_alone(self, name: str, owner: str) -> bool:
        keys = (protocol.lock_key(name, cluster=self._cluster),)
        channel = protocol.release_channel(name, cluster=self._cluster)
        return bool(await self._eval(protocol.RELEASE, keys, (owner, channel)))

    async def _release_together(
        self, held: Sequence[tuple[str, str]]
    ) -> list[bool | BaseException]:
        """The releases that waited for one another: one pipeline (one per primary on a
        cluster), each release its own `RELEASE` script and its own answer.

        A resident node ends the fires of an instant together, and one `EVALSHA` per
        release was a third of a winning node's CPU on Redis. A release's
        error reply is its own answer, raised to its caller alone; a connection lost
        mid-pipeline fails the releases whose replies were not read (their outcome is
        unknown, never read as released). A lone release is sent alone.
        """
        if len(held) == 1:
            return [await self._release_alone(*held[0])]
        commands = [protocol.release(name, owner, cluster=self._cluster) for name, owner in held]
        if self._cluster:

            async def resend(refused: list[int]) -> list[Any]:
                return [await self._release_alone(*held[i]) for i in refused]

            replies = await self._by_primary(commands, resend)
        else:
            replies = await self._pipelined(commands)
        return [reply if isinstance(reply, BaseException) else bool(reply) for reply in replies]

    async def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        keys = (protocol.lock_key(name, cluster=self._cluster),)
        ttl = protocol.milliseconds(ttl_seconds)
        return bool(await self._eval(protocol.RENEW, keys, (owner, ttl)))

    async def _fence(self, name: str) -> int:
        key = protocol.fence_key(name, cluster=self._cluster)
        async with gated(self._gate):
            return int(await (await self._redis()).incr(key))

    async def _close(self) -> None:
        await self._listener.aclose()
        if self._server is not None and self._client is not None:
            await self._client.aclose()  # sync: close_built_client(self._client)

    def _describe(self, err: BaseException) -> str:
        described = super()._describe(err)
        advice = protocol.hint(err)
        return f"{described} ({advice})" if advice else described

    # -- the driver ---------------------------------------------------------------

    async def _redis(self) -> Client:
        """The client, ready for concurrent use."""
        client = self._client
        if client is None:
            client = await self._connect()
        return client

    async def _connect(self) -> Client:
        """First use of a cluster client: build it (from a URL) and read its slot map once.

        redis-py's synchronous cluster client reads the slot map when it is built, so
        building it waits until here: construction stays free of I/O. Its asyncio
        client reads the map on its first command, and when many coroutines send
        their first commands at once some fail with `ConnectionError` ("Connection
        closed by server"; redis-py 8.1). So one caller initialises it, under a
        lock, before any command is sent. A failure leaves nothing half-built: the
        next call starts again.
        """
        async with self._connecting:
            if self._client is None:
                client = self._given
                if client is None and self._server is not None:
                    client = _client_from_url(self._server, self.pool_size)
                if client is None:  # pragma: no cover - a URL or a client is always given
                    raise AssertionError("AsyncRedisLock has neither a client nor a URL")
                if isinstance(client, redis.asyncio.RedisCluster):  # sync: drop
                    await client.initialize()  # sync: drop
                self._client = client
            return self._client

    async def _eval(self, script: protocol.Script, keys: tuple[bytes, ...], args: Any) -> Any:
        """One `EVALSHA`; the script is loaded again when the server forgot it (NOSCRIPT).

        A restart without persistence, a failover or `SCRIPT FLUSH` empties the
        server's script cache; on a cluster `SCRIPT LOAD` goes to every primary.
        """
        async with gated(self._gate):
            client = await self._redis()
            try:
                return await client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                await client.script_load(script.source)
                return await client.evalsha(script.sha, len(keys), *keys, *args)


_LOCK_NAME = "the redis lock"


async def _pipeline(client: Client, commands: Sequence[protocol.Command]) -> list[Any]:
    """The commands in one pipeline (no transaction): each reply, or its error."""
    pipeline = client.pipeline(transaction=False)
    for command in commands:
        pipeline.execute_command(*command.args)
    return list(await pipeline.execute(raise_on_error=False))


def _client_from_url(server: ServerUrl, pool_size: int | None) -> Client:
    """A client whose pool (each node's, on a cluster) holds at most `pool_size` connections.

    The lock's gate keeps the commands in flight within `pool_size`, so the pool's
    own cap is never reached; were it reached, redis-py raises `MaxConnectionsError`
    at once rather than open one more.
    """
    no_retries = redis.asyncio.retry.Retry(NoBackoff(), 0)
    pool_size = pool_size or DEFAULT_POOL_SIZE
    if server.cluster:
        return redis.asyncio.RedisCluster.from_url(
            server.driver_url,
            retry=no_retries,
            max_connections=pool_size,
            **CLIENT_DEFAULTS,
        )
    return redis.asyncio.Redis.from_url(
        server.driver_url,
        retry=no_retries,
        max_connections=pool_size,
        **CLIENT_DEFAULTS,
    )
