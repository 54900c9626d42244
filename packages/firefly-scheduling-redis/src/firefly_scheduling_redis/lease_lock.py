"""`RedisLock`: a lease per name, kept as a Redis key that the server expires.

A lock is the key `firefly:scheduling:lock:<name>` holding this acquisition's owner
token, written with `SET NX PX`, so Redis itself frees it when the TTL passes.
Release and renewal are Lua scripts that act only while the key still holds the
token, so a late release never frees a newer holder. Fencing tokens come from
`INCR firefly:scheduling:fence:<name>`, in the same script as the acquisition.

Keys need no `ServerKeyScheme`: Redis keys are binary-safe strings of up to 512 MB,
so the UTF-8 bytes of any valid name (at most 255 characters, so at most 1,020
bytes) are a legal key as they are. Prefix + name is injective and stays readable
for an operator; a digest would only hide the name.

Limits, stated once here and in the docs page:

* One Redis server (or primary). Replication is asynchronous: a failover can
  promote a replica that never saw a lock just taken, and two nodes then hold it.
  Redlock (a majority of independent servers) is not implemented.
* The TTL runs on the Redis server's clock, not the nodes'.
* An eviction policy that may evict any key (`allkeys-*`) can evict a held lock;
  use `noeviction` or a `volatile-*` policy.
* Redis Cluster clients are refused: the fenced acquisition touches two keys that
  may live in different slots.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Final

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.connection import SSLConnection
from redis.exceptions import (
    AuthenticationError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
)
from redis.retry import Retry
from redis.sentinel import SentinelConnectionPool

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.locks.connection_url import parse_lock_url
from firefly_scheduling.locks.redaction import redact_url, scrub, url_secrets

URL_SCHEMES: Final = ("redis", "rediss", "unix")
LOCK_KEY_PREFIX: Final = "firefly:scheduling:lock:"
FENCE_KEY_PREFIX: Final = "firefly:scheduling:fence:"

#: Client options for a client built from a URL. The URL's query wins (for example
#: `?socket_timeout=10`). No retries: a call is one round trip bounded by the timeouts;
#: a connection the server closed is still replaced when the pool hands it out.
CLIENT_DEFAULTS: Final[dict[str, Any]] = {
    "socket_connect_timeout": 3.0,
    "socket_timeout": 3.0,
}

# What an operator must fix when a server that answers refuses a command anyway.
# The first matching class wins, so subclasses come before ResponseError.
_MISCONFIGURATION_HINTS: Final[tuple[tuple[type[RedisError], str], ...]] = (
    (ReadOnlyError, "the URL points at a read-only replica; point it at the primary"),
    (
        NoPermissionError,
        "the Redis user lacks an ACL permission; it needs GET, SET, DEL, PEXPIRE, INCR, "
        "EVALSHA and SCRIPT LOAD on the keys firefly:scheduling:*",
    ),
    (OutOfMemoryError, "maxmemory is reached and the eviction policy refuses writes"),
    (AuthenticationError, "check the user name and password of the URL or client"),
    (
        ResponseError,
        "the server refused the command; check that Lua scripting is enabled and that "
        "no command the lock uses is renamed or disabled",
    ),
)


class RedisLock(BaseLock):
    """A Redis lease lock per name; the server frees it when the TTL passes.

    `url_or_client` is a `redis://`, `rediss://` or `unix://` URL (a client is built
    with `CLIENT_DEFAULTS` and closed by `close()`), or an existing synchronous
    `redis.Redis` client, which is used as it is (its timeouts and retries apply)
    and left open. Anything else, including an asyncio client, is a
    `ConfigurationError` at construction. Thread-safe: redis-py's connection pool
    gives each concurrent call its own connection.
    """

    backend_name: ClassVar[str] = "redis"
    ttl_honoured: ClassVar[bool] = True
    session_scoped: ClassVar[bool] = False
    supports_fencing: ClassVar[bool] = True
    renewable: ClassVar[bool] = True
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (RedisError, OSError)

    #: KEYS[1] lock key; ARGV[1] owner token.
    #: Returns 1 when the key held the token and was deleted; 0 when it was absent or
    #: held another token (expired and taken over), which it then leaves alone.
    RELEASE_SCRIPT: ClassVar[str] = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""

    #: KEYS[1] lock key; ARGV[1] owner token; ARGV[2] new TTL in milliseconds.
    #: Returns 1 when the key held the token and now expires ARGV[2] ms from now; else 0.
    RENEW_SCRIPT: ClassVar[str] = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""

    #: KEYS[1] lock key, KEYS[2] fence counter key; ARGV[1] owner token; ARGV[2] TTL in ms.
    #: Returns the incremented fence counter when the lock was free and is now taken;
    #: nil (no increment) when another token holds it. One round trip for both.
    ACQUIRE_FENCED_SCRIPT: ClassVar[str] = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('incr', KEYS[2])
end
return false
"""

    def __init__(self, url_or_client: str | redis.Redis) -> None:
        if isinstance(url_or_client, str):
            scheme = parse_lock_url(url_or_client, provider="redis", schemes=URL_SCHEMES).scheme
            # redis-py only knows the lower-case schemes.
            url = scheme + url_or_client.strip()[len(scheme) :]
            super().__init__(target=redact_url(url), secrets=url_secrets(url))
            self._client = _client_from_url(url)
            self._owns_client = True
        else:
            client = _checked_client(url_or_client)
            password = client.connection_pool.connection_kwargs.get("password")
            super().__init__(
                target=describe_client(client), secrets=(password,) if password else ()
            )
            self._client = client
            self._owns_client = False
        # Registered once: each call sends EVALSHA, and redis-py's Script loads the
        # source again by itself if the server answers NOSCRIPT (after a restart).
        self._release_script = self._client.register_script(self.RELEASE_SCRIPT)
        self._renew_script = self._client.register_script(self.RENEW_SCRIPT)
        self._acquire_fenced_script = self._client.register_script(self.ACQUIRE_FENCED_SCRIPT)

    @staticmethod
    def key(name: str) -> bytes:
        """The Redis key of the lock `name`: the prefix and the name's UTF-8 bytes."""
        return (LOCK_KEY_PREFIX + name).encode("utf-8")

    @staticmethod
    def fence_key(name: str) -> bytes:
        """The Redis key of the fencing counter of `name`; it never expires."""
        return (FENCE_KEY_PREFIX + name).encode("utf-8")

    # -- BaseLock hooks -----------------------------------------------------------

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        won = self._client.set(self.key(name), owner, nx=True, px=_milliseconds(ttl_seconds))
        return bool(won)

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        token = self._acquire_fenced_script(
            keys=[self.key(name), self.fence_key(name)], args=[owner, _milliseconds(ttl_seconds)]
        )
        return None if token is None else int(token)

    def _release(self, name: str, owner: str) -> bool:
        return bool(self._release_script(keys=[self.key(name)], args=[owner]))

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        ttl = _milliseconds(ttl_seconds)
        return bool(self._renew_script(keys=[self.key(name)], args=[owner, ttl]))

    def _fence(self, name: str) -> int:
        return int(self._client.incr(self.fence_key(name)))

    def _close(self) -> None:
        if self._owns_client:
            self._client.close()

    def _describe(self, err: BaseException) -> str:
        described = super()._describe(err)
        for error_class, hint in _MISCONFIGURATION_HINTS:
            if isinstance(err, error_class):
                return f"{described} ({hint})"
        return described


def describe_client(client: redis.Redis) -> str:
    """Where `client` connects (scheme, host, port, db), without any credential."""
    pool = client.connection_pool
    options = pool.connection_kwargs
    db = options.get("db", 0)
    if isinstance(pool, SentinelConnectionPool):
        return f"sentinel master {pool.service_name!r}, db {db}"
    if "path" in options:
        return f"unix://{options['path']}?db={db}"
    scheme = "rediss" if issubclass(pool.connection_class, SSLConnection) else "redis"
    return f"{scheme}://{options.get('host', 'localhost')}:{options.get('port', 6379)}/{db}"


def _client_from_url(url: str) -> redis.Redis:
    try:
        return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), **CLIENT_DEFAULTS)
    except ValueError as err:
        # redis-py refuses bad query values here; its message may quote the URL.
        problem = scrub(str(err), url_secrets(url))
    # Raised outside the handler, so redis-py's error is not kept as __context__.
    raise ConfigurationError(
        f"the redis lock provider got an invalid URL {redact_url(url)}: {problem}"
    )


def _checked_client(client: object) -> redis.Redis:
    if isinstance(client, redis.asyncio.Redis):
        raise ConfigurationError(
            "the redis lock provider needs a synchronous client, got the asyncio "
            f"{type(client).__module__}.{type(client).__qualname__}; pass a redis.Redis "
            "or a redis:// URL"
        )
    if not isinstance(client, redis.Redis):
        raise ConfigurationError(
            "the redis lock provider needs a redis://, rediss:// or unix:// URL or a "
            f"redis.Redis client, got {type(client).__module__}.{type(client).__qualname__}"
        )
    return client


def _milliseconds(ttl_seconds: float) -> int:
    # Rounded up, so the server never frees the lock before the TTL the caller asked for.
    return math.ceil(ttl_seconds * 1000)
