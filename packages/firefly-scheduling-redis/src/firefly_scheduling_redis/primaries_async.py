"""Commands on single names, sent to a Redis Cluster as one pipeline per primary.

A resident node claims the fires of one instant together and then takes the task
locks of the ones it won together (`acquire_many`). On one server each is one
pipeline. redis-py's cluster pipeline does not fit either: it refuses `EVALSHA`
(the fenced acquisition), and after a connection lost mid-pipeline it sends the
node's commands again one by one, so a `SET NX` that had in fact won answers
"taken" on its second send (redis-py 8.1, `ClusterPipeline`). Sent one at a time
through the cluster client instead, each costs a full round of redis-py's routing
and, in a resident host, a worker thread's round trip.

So `send_by_primary` groups the commands by the primary that owns each key's slot
(the cluster client's slot map) and sends each group as a plain pipeline (no
transaction) on that primary's own connection: one round trip per primary. Every
command keeps its own answer:

* a reply is the answer;
* an error proving the command did not run (`protocol.NOT_RUN`: MOVED, ASK,
  TRYAGAIN, NOSCRIPT, or no known node for the slot) is handed back as it is, for
  the caller to send that command again through the cluster client, which follows
  redirections, refreshes its slot map and reloads a script;
* any other error reply is that command's answer (it failed, nothing else);
* a connection lost or timed out on a primary is the answer of the commands of its
  group (all of them in the synchronous flavour, whose pipeline raises; in the
  asyncio one, those whose reply was not read yet): their outcome is unknown, never
  retried here, never read as lost or won. The slot map is then read again, as the
  cluster client does after its own connection errors, so the next batch follows a
  failover.

The primaries' clients are redis-py's own, built by the cluster client with no
retries (redis-py 8.1 builds every node's connections so, whatever the cluster
client's own retry), so a pipeline is sent once. The groups go one after another.

Written for asyncio; `primaries.py` is generated from it by `tools/async_to_sync.py`.
"""

# async-to-sync: rename redis.asyncio.RedisCluster redis.cluster.RedisCluster

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import redis.asyncio  # sync: import redis.cluster
import redis.asyncio.cluster  # sync: drop
from redis.exceptions import ConnectionError, RedisClusterException, RedisError, TimeoutError

from firefly_scheduling.concurrency.flavour import ASYNC  # sync: drop
from firefly_scheduling_redis.protocol import Command

#: A primary's connection failed under these: its unread replies are unknown.
LOST: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, OSError)


async def send_by_primary(
    client: redis.asyncio.RedisCluster, commands: Sequence[Command]
) -> list[Any]:
    """Each command's reply or error, in order (see the module doc)."""
    answers: list[Any] = [None] * len(commands)
    groups, unrouted = _by_primary(client, commands)
    for index, error in unrouted.items():
        answers[index] = error
    for node, indices in groups.values():
        replies = await _send_group(client, node, [commands[i].args for i in indices])
        for index, reply in zip(indices, replies, strict=True):
            answers[index] = reply
    return answers


def _by_primary(
    client: redis.asyncio.RedisCluster, commands: Sequence[Command]
) -> tuple[dict[str, tuple[Any, list[int]]], dict[int, BaseException]]:
    """The commands' indices by the primary that owns their key's slot, by node name;
    and those whose slot the client knows no node for (`SlotNotCoveredError`)."""
    groups: dict[str, tuple[Any, list[int]]] = {}
    unrouted: dict[int, BaseException] = {}
    for index, command in enumerate(commands):
        try:
            node = _primary(client, command.key)
        except RedisClusterException as err:  # no node for the slot: nothing is sent
            unrouted[index] = err
            continue
        groups.setdefault(node.name, (node, []))[1].append(index)
    return groups, unrouted


async def _send_group(
    client: redis.asyncio.RedisCluster, node: Any, group: list[tuple[Any, ...]]
) -> list[Any]:
    """One pipeline to `node`: each reply or error, or the failure for all of them."""
    try:
        replies = await _pipeline(client, node, group)
    except (RedisError, OSError) as err:  # the whole group: sent or not, unknown
        replies = [err] * len(group)
    if any(isinstance(reply, LOST) for reply in replies):
        await _refresh(client, node)
    return replies


if ASYNC:

    def _primary(client: redis.asyncio.RedisCluster, key: bytes) -> Any:
        """The primary that owns `key`'s slot, by the client's slot map."""
        return client.get_node_from_key(key)  # type: ignore[arg-type]  # bytes are encoded

    async def _pipeline(
        client: redis.asyncio.RedisCluster,
        node: redis.asyncio.cluster.ClusterNode,
        group: list[tuple[Any, ...]],
    ) -> list[Any]:
        """The node's own pipeline, as redis-py's cluster pipeline sends it: the
        replies read before a failure are kept, the ones after it are the failure."""
        queued = [redis.asyncio.cluster.PipelineCommand(i, *args) for i, args in enumerate(group)]
        await node.execute_pipeline(queued)
        return [command.result for command in queued]

else:

    def _primary(client: redis.cluster.RedisCluster, key: bytes) -> Any:
        """The primary that owns `key`'s slot, by the client's slot map."""
        return client.get_node_from_key(key)  # type: ignore[no-untyped-call]

    def _pipeline(
        client: redis.cluster.RedisCluster,
        node: redis.cluster.ClusterNode,
        group: list[tuple[Any, ...]],
    ) -> list[Any]:
        """The node's client's plain pipeline; a failure mid-way raises for all."""
        pipeline = client.get_redis_connection(node).pipeline(transaction=False)
        for args in group:
            pipeline.execute_command(*args)  # type: ignore[no-untyped-call]
        return list(pipeline.execute(raise_on_error=False))


async def _refresh(client: redis.asyncio.RedisCluster, failed: Any) -> None:
    """Read the slot map again after `failed` lost a connection, as the cluster client
    does after its own; a refresh that fails too changes no answer."""
    # A refresh that fails leaves the map as it was: the next command fails and tries again.
    with contextlib.suppress(RedisError, RedisClusterException, OSError):
        await client.nodes_manager.initialize(last_failed_node_name=failed.name)
