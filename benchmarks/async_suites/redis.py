"""redis: AsyncRedisLock against raw redis.asyncio sending the same commands.

Two cycles per server, each next to its floor: the plain one (`SET NX PX`, then the
release `EVALSHA`) and the fenced one (the acquire-fenced `EVALSHA`, then the release
`EVALSHA`). The floor sends exactly those commands, with the lock's own scripts, on
a client built with the same options, and keeps no holding bookkeeping.
`redis_cluster.py` runs the same cases on a Redis Cluster.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any

from async_locks import AsyncCase, AsyncCycle, lock_cycle, unique

REDIS = os.environ.get("FIREFLY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
TTL_MS = 30_000


def fenced_cycle(lock: Any, name: str) -> AsyncCycle:
    async def cycle() -> None:
        if await lock.try_acquire_fenced(name, TTL_MS / 1000) is None:
            raise RuntimeError(f"{lock!r} did not win uncontended {name!r}")
        await lock.release(name)

    return cycle


async def cases_for(url: str, backend: str, stack: AsyncExitStack) -> list[AsyncCase]:
    """The adapter's two cycles and their raw floors, on the server or cluster of `url`."""
    import redis.asyncio  # noqa: PLC0415 - optional benchmark dependency

    from firefly_scheduling_redis import AsyncRedisLock, protocol  # noqa: PLC0415
    from firefly_scheduling_redis.url import CLIENT_DEFAULTS, parse_url  # noqa: PLC0415

    lock = AsyncRedisLock(url)
    stack.push_async_callback(lock.aclose)
    server = parse_url(url)
    raw_class: Any = redis.asyncio.RedisCluster if server.cluster else redis.asyncio.Redis
    client = raw_class.from_url(server.driver_url, **CLIENT_DEFAULTS)
    stack.push_async_callback(client.aclose)
    for script in (protocol.RELEASE, protocol.ACQUIRE_FENCED):
        await client.script_load(script.source)
    release, fenced = protocol.RELEASE.sha, protocol.ACQUIRE_FENCED.sha
    plain_name, fenced_name = unique(f"{backend}-floor"), unique(f"{backend}-floor-fenced")
    plain_key = protocol.lock_key(plain_name, cluster=server.cluster)
    fenced_keys = (
        protocol.lock_key(fenced_name, cluster=server.cluster),
        protocol.fence_key(fenced_name, cluster=server.cluster),
    )

    async def plain_floor() -> None:
        owner = unique("owner")
        if not await client.set(plain_key, owner, nx=True, px=TTL_MS):
            raise RuntimeError("raw redis did not win")
        await client.evalsha(release, 1, plain_key, owner)

    async def fenced_floor() -> None:
        owner = unique("owner")
        if await client.evalsha(fenced, 2, *fenced_keys, owner, TTL_MS) is None:
            raise RuntimeError("raw redis did not win")
        await client.evalsha(release, 1, fenced_keys[0], owner)

    raw = f"raw {type(client).__module__}.{type(client).__qualname__}"
    return [
        AsyncCase(backend, "AsyncRedisLock", "adapter", lock_cycle(lock, unique(backend))),
        AsyncCase(backend, raw, "floor", plain_floor),
        AsyncCase(
            f"{backend} fenced",
            "AsyncRedisLock",
            "adapter",
            fenced_cycle(lock, unique(f"{backend}-fenced")),
        ),
        AsyncCase(f"{backend} fenced", raw, "floor", fenced_floor),
    ]


async def cases(stack: AsyncExitStack) -> list[AsyncCase]:
    return await cases_for(REDIS, "redis", stack)


def pair() -> tuple[Any, Any]:
    from firefly_scheduling_redis import AsyncRedisLock, RedisLock  # noqa: PLC0415

    return (lambda: AsyncRedisLock(REDIS)), (lambda: RedisLock(REDIS))
