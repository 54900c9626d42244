"""Describe and check a redis-py client a user hands in, for either flavour, without I/O.

A lock built on a user's client shows where it connects in `repr` and in errors,
never a credential, and keeps the client's password to scrub from driver messages.
Four kinds are understood: a single-server client (plain, TLS, Unix socket or a
Sentinel-managed primary) and a cluster client, each synchronous or asyncio.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.connection
import redis.asyncio.sentinel
import redis.cluster
import redis.connection
import redis.sentinel

from firefly_scheduling.errors import ConfigurationError

SYNC_CLIENTS: tuple[type[Any], ...] = (redis.Redis, redis.cluster.RedisCluster)
ASYNC_CLIENTS: tuple[type[Any], ...] = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)
_SSL_CONNECTIONS = (redis.connection.SSLConnection, redis.asyncio.connection.SSLConnection)
_SENTINEL_POOLS = (
    redis.sentinel.SentinelConnectionPool,
    redis.asyncio.sentinel.SentinelConnectionPool,
)


def check_flavour(client: object, *, asyncio: bool) -> None:
    """Refuse anything but a redis-py client of the flavour the lock drives, naming its type."""
    wanted, other = (ASYNC_CLIENTS, SYNC_CLIENTS) if asyncio else (SYNC_CLIENTS, ASYNC_CLIENTS)
    if isinstance(client, wanted):
        return
    kind = f"{type(client).__module__}.{type(client).__qualname__}"
    lock, flavour, examples = (
        ("AsyncRedisLock", "an asyncio", "redis.asyncio.Redis or redis.asyncio.RedisCluster")
        if asyncio
        else ("RedisLock", "a synchronous", "redis.Redis or redis.cluster.RedisCluster")
    )
    if isinstance(client, other):
        shown = "synchronous" if asyncio else "asyncio"
        raise ConfigurationError(
            f"the redis lock provider's {lock} needs {flavour} client, got the {shown} "
            f"{kind}; pass a {examples} or a redis:// or redis+cluster:// URL"
        )
    raise ConfigurationError(
        "the redis lock provider needs a redis://, rediss://, unix://, redis+cluster:// or "
        f"rediss+cluster:// URL or a {examples} client, got {kind}"
    )


def is_cluster(client: object) -> bool:
    return isinstance(client, (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster))


def describe_client(client: Any) -> str:
    """Where `client` connects (scheme, host, port, db), without any credential."""
    if is_cluster(client):
        return _describe_cluster(client)
    pool = client.connection_pool
    options = pool.connection_kwargs
    db = options.get("db", 0)
    if isinstance(pool, _SENTINEL_POOLS):
        return f"sentinel master {pool.service_name!r}, db {db}"
    if "path" in options:
        return f"unix://{options['path']}?db={db}"
    scheme = "rediss" if issubclass(pool.connection_class, _SSL_CONNECTIONS) else "redis"
    return f"{scheme}://{options.get('host', 'localhost')}:{options.get('port', 6379)}/{db}"


def client_secrets(client: Any) -> tuple[str, ...]:
    """The password `client` authenticates with, to scrub from driver messages."""
    password = _options(client).get("password")
    return (password,) if isinstance(password, str) and password else ()


def _describe_cluster(client: Any) -> str:
    options = _options(client)
    ssl = options.get("ssl") or issubclass(
        options.get("connection_class", redis.connection.Connection), _SSL_CONNECTIONS
    )
    startup = sorted(client.nodes_manager.startup_nodes) or ["(no startup node)"]
    return f"{'rediss' if ssl else 'redis'}+cluster://{startup[0]}"


def _options(client: Any) -> dict[str, Any]:
    if isinstance(client, redis.cluster.RedisCluster):
        options: dict[str, Any] = client.nodes_manager.connection_kwargs
    elif isinstance(client, redis.asyncio.cluster.RedisCluster):
        options = client.connection_kwargs
    else:
        options = client.connection_pool.connection_kwargs
    return options


def subscriber_connection(client: Any) -> Any | None:
    """A new, unconnected redis-py connection to where `client` connects, outside its pool.

    For release notifications (`release_listener_async`): a subscribed connection can
    carry nothing else, and the pool's bound belongs to the lock's commands. It reads
    without a timeout, as a subscriber waits for messages. On a cluster it goes to the
    client's default node: `PUBLISH` reaches every node over the cluster bus. None
    for a Sentinel-managed client, whose connections need their pool to find the
    primary; its waiters poll.
    """
    if isinstance(client, redis.cluster.RedisCluster):
        node = client.get_default_node()  # type: ignore[no-untyped-call]  # redis-py's own
        pool = node.redis_connection.connection_pool
        connection_class, options = pool.connection_class, pool.connection_kwargs
    elif isinstance(client, redis.asyncio.cluster.RedisCluster):
        node = client.get_default_node()
        connection_class, options = node.connection_class, node.connection_kwargs
    elif isinstance(client.connection_pool, _SENTINEL_POOLS):
        return None
    else:
        pool = client.connection_pool
        connection_class, options = pool.connection_class, pool.connection_kwargs
    return connection_class(**{**options, "socket_timeout": None})


def close_built_client(client: redis.Redis | redis.cluster.RedisCluster) -> None:
    """Close a synchronous client this package built from a URL, and every connection.

    redis-py's `RedisCluster.from_url` gives each node a client over a pool it does not
    own, so `RedisCluster.close()` leaves the nodes' connections open (redis-py 8.1)
    until the garbage collector finds them: each closed lock kept one per node, and a
    process that builds and closes locks piled them up. The asyncio cluster client's
    `aclose()` closes its nodes' connections itself.
    """
    nodes = []
    if isinstance(client, redis.cluster.RedisCluster):
        nodes = client.get_nodes()  # type: ignore[no-untyped-call]
    client.close()
    for node in nodes:
        if node.redis_connection is not None:
            node.redis_connection.connection_pool.disconnect()
