"""redis_cluster: the redis cases on a Redis Cluster, against raw redis.asyncio.RedisCluster."""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any

from async_locks import AsyncCase
from async_suites.redis import cases_for

CLUSTER = os.environ.get("FIREFLY_TEST_REDIS_CLUSTER_URL", "redis+cluster://127.0.0.1:7000")


async def cases(stack: AsyncExitStack) -> list[AsyncCase]:
    return await cases_for(CLUSTER, "redis-cluster", stack)


def pair() -> tuple[Any, Any]:
    from firefly_scheduling_redis import AsyncRedisLock, RedisLock  # noqa: PLC0415

    return (lambda: AsyncRedisLock(CLUSTER)), (lambda: RedisLock(CLUSTER))
