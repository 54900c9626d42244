"""`afenced_set`: a Redis write that refuses a value stamped with an older token.

One `EVALSHA` of `redis_script.FENCED_SET`: the compare and the write are atomic on
the server. A server that forgot the script (restart, failover, `SCRIPT FLUSH`) is
sent it again once.
"""

# async-to-sync: rename afenced_set fenced_set
# async-to-sync: rename redis.asyncio.Redis redis.Redis
# async-to-sync: rename redis.asyncio.RedisCluster redis.cluster.RedisCluster

from __future__ import annotations

from typing import TYPE_CHECKING

from redis.exceptions import NoScriptError

from firefly_scheduling.fencing.redis_script import (
    FENCED_SET,
    FENCED_SET_SHA,
    RedisValue,
    fenced_set_arguments,
)

if TYPE_CHECKING:
    import redis.asyncio  # sync: import redis
    # sync: import redis.cluster


async def afenced_set(
    client: redis.asyncio.Redis | redis.asyncio.RedisCluster,
    key: str | bytes,
    value: RedisValue,
    token: int | None,
) -> bool:
    """Store `value` and `token` in the hash `key` unless it holds a greater token.

    A None `token` is refused with the reason (`FencingTokenError`). Returns whether
    it was written. An equal token writes (one holding may run two
    bodies). Compare tokens of one lock name on one backend only.
    """
    hashed, argument, decimal = fenced_set_arguments(key, value, token, caller="afenced_set")
    try:
        written = await client.evalsha(FENCED_SET_SHA, 1, hashed, argument, decimal)
    except NoScriptError:
        await client.script_load(FENCED_SET)
        written = await client.evalsha(FENCED_SET_SHA, 1, hashed, argument, decimal)
    return int(written) == 1
