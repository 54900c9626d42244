"""The Redis lock's protocol without I/O: keys, Lua scripts, commands and error hints.

`AsyncRedisLock` and the generated `RedisLock` both drive these pieces, so the two
flavours cannot disagree on a key, a script or an owner rule, and therefore exclude
each other on the same name.

**Keys.** On one server (or a Sentinel-managed primary) a lock is
`firefly:scheduling:lock:<name>` and its fencing counter
`firefly:scheduling:fence:<name>`: the prefix and the name's UTF-8 bytes, readable
and injective (Redis keys are binary-safe, so no `ServerKeyScheme` is needed).

On a **Redis Cluster** a script may only touch keys of one slot, and the fenced
acquisition touches two. There both keys carry one hash tag, the part between the
first `{` and the next `}`: `{firefly:scheduling:<name>}:lock` and
`{firefly:scheduling:<name>}:fence`. The tag starts with our own text, so it is never
empty (an empty `{}` would hash the whole key), and whatever the name holds, the two
keys of one name share their tag and so their slot. A fixed prefix and suffix keep
the keys injective. Single-node keys keep their old form, so upgrading moves no
running lock. (A name containing `}` hashes by its part before the `}`; that only
groups such names into fewer slots.)

**Owner rule.** Every acquisition writes a fresh random token; release and renewal
act only while the key still holds it (`RELEASE`, `RENEW`), so a late release never
frees a newer holder. The fencing token is `INCR` of the counter, in the same script
as the acquisition (`ACQUIRE_FENCED`): one round trip, and a refused attempt consumes
no token.

**Waking waiters.** A release publishes on the name's channel (`release_channel`),
in the same script, so a waiter subscribed to it tries again at once instead of
polling. A lease that lapses publishes nothing: a waiter bounds its sleep by the
holder's remaining lease. The waiters' queue, which orders them across processes,
has its keys and scripts in `waiter_queue`.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Final

from redis.exceptions import (
    AskError,
    AuthenticationError,
    ClusterDownError,
    MovedError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)

LOCK_KEY_PREFIX: Final = "firefly:scheduling:lock:"
FENCE_KEY_PREFIX: Final = "firefly:scheduling:fence:"
#: Cluster keys: `{firefly:scheduling:<name>}:lock` and `...:fence` (see the module doc).
CLUSTER_TAG_PREFIX: Final = "{firefly:scheduling:"
CLUSTER_LOCK_SUFFIX: Final = "}:lock"
CLUSTER_FENCE_SUFFIX: Final = "}:fence"
#: The channels releases are published on (`release_channel`).
RELEASED_CHANNEL_PREFIX: Final = "firefly:scheduling:released:"
CLUSTER_RELEASED_SUFFIX: Final = "}:released"


@dataclass(frozen=True)
class Script:
    """A Lua script and its SHA-1, which `EVALSHA` names it by."""

    source: str
    #: Computed once here, not per call.
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha1(self.source.encode("utf-8"), usedforsecurity=False).hexdigest()
        object.__setattr__(self, "sha", digest)


#: KEYS[1] lock key; ARGV[1] owner token; ARGV[2] the name's release channel.
#: Returns 1 when the key held the token and was deleted, and then publishes an empty
#: message on ARGV[2] for the name's waiters; 0 when it was absent or held another
#: token (expired and taken over), which it then leaves alone. The publish is
#: protected: a user whose ACL forbids it still releases (its waiters then poll).
RELEASE: Final = Script("""
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    redis.pcall('publish', ARGV[2], '')
    return 1
end
return 0
""")

#: KEYS[1] lock key; ARGV[1] owner token; ARGV[2] new TTL in milliseconds.
#: Returns 1 when the key held the token and now expires ARGV[2] ms from now; else 0.
RENEW: Final = Script("""
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
""")

#: KEYS[1] lock key, KEYS[2] fence counter key (one slot on a cluster); ARGV[1] owner
#: token; ARGV[2] TTL in ms. Returns the incremented fence counter when the lock was
#: free and is now taken; nil (no increment) when another token holds it.
ACQUIRE_FENCED: Final = Script("""
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('incr', KEYS[2])
end
return false
""")


#: What proves that a command did not run, so that sending it again cannot run it
#: twice: the server refused it before running it, because another node owns the
#: key's slot (MOVED), the slot is moving and the key is elsewhere (ASK), its keys are
#: split by a slot being moved (TRYAGAIN) or the script is not loaded (NOSCRIPT); or the
#: client knew no node for the key's slot and never sent it (`SlotNotCoveredError`).
#: Connection errors are not here: a command whose reply was lost may have run.
NOT_RUN: Final[tuple[type[BaseException], ...]] = (
    MovedError,
    AskError,
    TryAgainError,
    NoScriptError,
    SlotNotCoveredError,
)


@dataclass(frozen=True)
class Command:
    """One command on the keys of one name; on a cluster, `key` says where it goes.

    `script` is the script an `EVALSHA` names, loaded again if the server forgot it.
    """

    key: bytes
    args: tuple[Any, ...]
    script: Script | None = None


def acquisition(
    name: str, owner: str, ttl_seconds: float, *, fenced: bool, cluster: bool
) -> Command:
    """The command that takes `name` for `owner`: `ACQUIRE_FENCED`, or `SET NX PX`.

    The same command a pipeline sends, on one server or on a cluster's primary, so
    that a batch and a single call cannot differ.
    """
    key = lock_key(name, cluster=cluster)
    ttl = milliseconds(ttl_seconds)
    if fenced:
        fence = fence_key(name, cluster=cluster)
        args = ("EVALSHA", ACQUIRE_FENCED.sha, 2, key, fence, owner, ttl)
        return Command(key, args, ACQUIRE_FENCED)
    return Command(key, ("SET", key, owner, "PX", ttl, "NX"))


def release(name: str, owner: str, *, cluster: bool) -> Command:
    """The command that releases `name` if `owner` still holds it: `RELEASE`."""
    key = lock_key(name, cluster=cluster)
    channel = release_channel(name, cluster=cluster)
    return Command(key, ("EVALSHA", RELEASE.sha, 1, key, owner, channel), RELEASE)


def release_channel(name: str, *, cluster: bool) -> bytes:
    """The channel the release of `name` is published on, for its waiters.

    A plain `PUBLISH`, not the sharded `SPUBLISH` of Redis 7: on a cluster it
    reaches every node over the cluster bus, so one subscriber connection per lock
    (to any node) hears every name, where a sharded channel would need one per shard.
    """
    if cluster:
        return (CLUSTER_TAG_PREFIX + name + CLUSTER_RELEASED_SUFFIX).encode("utf-8")
    return (RELEASED_CHANNEL_PREFIX + name).encode("utf-8")


def lock_key(name: str, *, cluster: bool) -> bytes:
    """The key of the lock `name`; a name that is not valid text raises `ValueError`."""
    if cluster:
        return (CLUSTER_TAG_PREFIX + name + CLUSTER_LOCK_SUFFIX).encode("utf-8")
    return (LOCK_KEY_PREFIX + name).encode("utf-8")


def fence_key(name: str, *, cluster: bool) -> bytes:
    """The key of the fencing counter of `name`; it never expires."""
    if cluster:
        return (CLUSTER_TAG_PREFIX + name + CLUSTER_FENCE_SUFFIX).encode("utf-8")
    return (FENCE_KEY_PREFIX + name).encode("utf-8")


def milliseconds(ttl_seconds: float) -> int:
    """Rounded up, so the server never frees the lock before the TTL the caller asked for."""
    return math.ceil(ttl_seconds * 1000)


# What an operator must fix when a server that answers refuses a command anyway.
# The first matching class wins, so subclasses come before ResponseError.
_MISCONFIGURATION_HINTS: Final[tuple[tuple[type[RedisError], str], ...]] = (
    (ReadOnlyError, "the URL points at a read-only replica; point it at the primary"),
    (
        NoPermissionError,
        "the Redis user lacks an ACL permission; it needs GET, SET, DEL, EXISTS, PEXPIRE, "
        "PEXPIREAT, PTTL, INCR, TIME, ZADD, ZREM, ZSCORE, ZCARD, ZRANGE, ZRANGEBYSCORE, "
        "ZREMRANGEBYSCORE, EVALSHA and SCRIPT LOAD on the keys firefly:scheduling:* "
        "({firefly:scheduling:* on a cluster), and PUBLISH and SUBSCRIBE on the "
        "channels of the same patterns",
    ),
    (OutOfMemoryError, "maxmemory is reached and the eviction policy refuses writes"),
    (AuthenticationError, "check the user name and password of the URL or client"),
    (
        ClusterDownError,
        "the cluster is down or a slot has no primary; check CLUSTER INFO on its nodes",
    ),
    (
        ResponseError,
        "the server refused the command; check that Lua scripting is enabled and that "
        "no command the lock uses is renamed or disabled",
    ),
)


def hint(err: BaseException) -> str | None:
    """What to fix, when `err` is a refusal an operator can act on."""
    for error_class, advice in _MISCONFIGURATION_HINTS:
        if isinstance(err, error_class):
            return advice
    return None
