# Generated from redis_set_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`fenced_set`: a Redis write that refuses a value stamped with an older token.

One `EVALSHA` of `redis_script.FENCED_SET`: the compare and the write are atomic on
the server. A server that forgot the script (restart, failover, `SCRIPT FLUSH`) is
sent it again once.
"""

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
    import redis
    import redis.cluster


def fenced_set(
    client: redis.Redis | redis.cluster.RedisCluster,
    key: str | bytes,
    value: RedisValue,
    token: int | None,
) -> bool:
    """Store `value` and `token` in the hash `key` unless it holds a greater token.

    A None `token` is refused with the reason (`FencingTokenError`). Returns whether
    it was written. An equal token writes (one holding may run two
    bodies). Compare tokens of one lock name on one backend only.
    """
    hashed, argument, decimal = fenced_set_arguments(key, value, token, caller="fenced_set")
    try:
        written = client.evalsha(FENCED_SET_SHA, 1, hashed, argument, decimal)
    except NoScriptError:
        client.script_load(FENCED_SET)
        written = client.evalsha(FENCED_SET_SHA, 1, hashed, argument, decimal)
    return int(written) == 1
