"""The Redis lock's protocol without I/O: URLs, keys, Lua scripts and error hints.

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
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.connection import parse_url as redis_py_parse_url
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

from firefly_scheduling.concurrency.pool_size import (
    DEFAULT_POOL_SIZE,
    check_pool_size,
    chosen_pool_size,
)
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.urls.connection_url import parse_lock_url, query_names, unknown_option
from firefly_scheduling.urls.redaction import redact_url, scrub, url_secrets

#: One server: TCP, TLS, or a Unix socket.
SERVER_SCHEMES: Final = ("redis", "rediss", "unix")
#: A Redis Cluster, reached through one of its nodes (TCP or TLS).
CLUSTER_SCHEMES: Final = ("redis+cluster", "rediss+cluster")
URL_SCHEMES: Final = SERVER_SCHEMES + CLUSTER_SCHEMES

LOCK_KEY_PREFIX: Final = "firefly:scheduling:lock:"
FENCE_KEY_PREFIX: Final = "firefly:scheduling:fence:"
#: Cluster keys: `{firefly:scheduling:<name>}:lock` and `...:fence` (see the module doc).
CLUSTER_TAG_PREFIX: Final = "{firefly:scheduling:"
CLUSTER_LOCK_SUFFIX: Final = "}:lock"
CLUSTER_FENCE_SUFFIX: Final = "}:fence"

#: Client options for a client built from a URL. The URL's query wins (for example
#: `?socket_timeout=10`). No retries: a call is one round trip bounded by the timeouts;
#: a connection the server closed is still replaced when the pool hands it out.
#: A cluster client gets no retries either: a retried `SET NX` whose first send had
#: won would answer "taken", and a retried release "lost". After a failure redis-py's
#: cluster client refreshes its slot map, so the next call follows a failover.
CLIENT_DEFAULTS: Final[dict[str, Any]] = {
    "socket_connect_timeout": 3.0,
    "socket_timeout": 3.0,
}
#: Seconds a command waits for one of the lock's `pool_size` connections (see
#: `pool_gate_async`): as long as one round trip may take, by `CLIENT_DEFAULTS`.
POOL_WAIT_SECONDS: Final = 3.0
#: The URL's query option that bounds the connections of a client built from it.
POOL_SIZE_OPTION: Final = "pool_size"
#: The query options a lock URL may carry besides `pool_size`: the ones redis-py reads
#: from a URL into its connection that leave replies and round trips as the lock needs
#: them (not `decode_responses`, which changes what a reply is, nor `max_connections`,
#: which `pool_size` replaces). A `unix://` URL takes those its connection class has.
URL_OPTIONS: Final = (
    "db",
    "username",
    "password",
    "client_name",
    "protocol",
    "socket_timeout",
    "socket_connect_timeout",
    "socket_keepalive",
    "socket_read_size",
    "health_check_interval",
    "retry_on_timeout",
    "lib_name",
    "lib_version",
)
#: The options of a TLS URL (`rediss://`, `rediss+cluster://`) besides `URL_OPTIONS`.
TLS_URL_OPTIONS: Final = (
    "ssl_ca_certs",
    "ssl_ca_path",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_password",
    "ssl_cert_reqs",
    "ssl_check_hostname",
    "ssl_min_version",
    "ssl_ciphers",
    "ssl_include_verify_flags",
    "ssl_exclude_verify_flags",
)


@dataclass(frozen=True)
class Script:
    """A Lua script and its SHA-1, which `EVALSHA` names it by."""

    source: str
    #: Computed once here, not per call.
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha1(self.source.encode("utf-8"), usedforsecurity=False).hexdigest()
        object.__setattr__(self, "sha", digest)


#: KEYS[1] lock key; ARGV[1] owner token.
#: Returns 1 when the key held the token and was deleted; 0 when it was absent or held
#: another token (expired and taken over), which it then leaves alone.
RELEASE: Final = Script("""
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
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
    return Command(key, ("EVALSHA", RELEASE.sha, 1, key, owner), RELEASE)


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


@dataclass(frozen=True)
class ServerUrl:
    """A checked lock URL: what redis-py is given, and what may be shown."""

    #: The URL in the form redis-py reads (`redis+cluster://` becomes `redis://`),
    #: without our own `pool_size=` option.
    driver_url: str
    cluster: bool
    shown: str
    secrets: tuple[str, ...]
    #: `pool_size=` of the URL's query, or None when the URL does not set it.
    pool_size: int | None = None


def parse_url(url: str, *, provider: str = "redis") -> ServerUrl:
    """Check `url` at construction, before anything connects; refuse it with a clear error.

    Query options are parsed here the way redis-py will parse them, so a bad value
    (`?socket_timeout=soon`) is refused at boot for every kind of client, including
    a cluster client that is only built on first use. `pool_size=` is ours (the
    bound on the client's connections) and taken out of the URL redis-py sees;
    redis-py's own `max_connections=` is refused, since the lock's bound replaces it.
    """
    scheme = parse_lock_url(url, provider=provider, schemes=URL_SCHEMES).scheme
    text = url.strip()
    base, cluster = scheme.removesuffix("+cluster"), scheme in CLUSTER_SCHEMES
    # redis-py only knows the lower-case, single-server schemes.
    driver_url = base + text[len(scheme) :]
    secrets = url_secrets(text)
    shown = redact_url(text) if cluster else redact_url(driver_url)
    driver_url, pool_size = _take_pool_size(driver_url, shown, provider)
    known = known_options(base)
    for name in query_names(urlsplit(driver_url).query):
        if name not in known:
            raise unknown_option(
                name, provider=provider, known=(POOL_SIZE_OPTION, *known), shown=shown
            )
    try:
        options: dict[str, Any] = redis_py_parse_url(driver_url)  # type: ignore[no-untyped-call]
    except ValueError as err:
        # redis-py's message may quote the URL.
        problem: str | None = scrub(str(err), secrets)
    else:
        problem = None
        if cluster and options.get("db", 0) not in (0, "0"):
            problem = "a Redis Cluster has database 0 only; drop the path or ?db="
    if problem is not None:
        # Raised outside the handler, so redis-py's error is not kept as __context__.
        raise ConfigurationError(
            f"the {provider} lock provider got an invalid URL {shown}: {problem}"
        )
    return ServerUrl(driver_url, cluster, shown, secrets, pool_size)


@functools.cache
def known_options(scheme: str) -> tuple[str, ...]:
    """The query options a `scheme` URL (`redis`, `rediss` or `unix`) may carry.

    `URL_OPTIONS` (and `TLS_URL_OPTIONS` for TLS) that the installed redis-py's
    connection class for the scheme accepts, so a URL is never accepted here only
    to fail inside the driver on the first command.
    """
    connection: type[Any] = {
        "rediss": SSLConnection,
        "unix": UnixDomainSocketConnection,
    }.get(scheme, Connection)
    accepted = {
        parameter
        for cls in connection.__mro__
        if "__init__" in vars(cls)
        for parameter in inspect.signature(vars(cls)["__init__"]).parameters
    }
    wanted = URL_OPTIONS + (TLS_URL_OPTIONS if scheme == "rediss" else ())
    return tuple(option for option in wanted if option in accepted)


def _take_pool_size(driver_url: str, shown: str, provider: str) -> tuple[str, int | None]:
    """`driver_url` without `pool_size=`, and its checked value (None when absent)."""
    parts = urlsplit(driver_url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    names = [name for name, _ in pairs]
    if "max_connections" in names:
        raise ConfigurationError(
            f"the {provider} lock provider got max_connections= in the URL {shown}; the "
            f"lock bounds its connections with {POOL_SIZE_OPTION}= instead (default "
            f"{DEFAULT_POOL_SIZE}), which makes callers wait for a free connection"
        )
    if POOL_SIZE_OPTION not in names:
        return driver_url, None
    if names.count(POOL_SIZE_OPTION) > 1:
        raise ConfigurationError(
            f"the {provider} lock provider got {POOL_SIZE_OPTION}= twice in the URL {shown}"
        )
    value = dict(pairs)[POOL_SIZE_OPTION]
    size = check_pool_size(
        value, source=f"{POOL_SIZE_OPTION}= of the {provider} URL {shown}", text=True
    )
    rest = urlencode([(name, item) for name, item in pairs if name != POOL_SIZE_OPTION])
    return urlunsplit(parts._replace(query=rest)), size


def pool_size(server: ServerUrl | None, given: int | None, *, owner: str) -> int:
    """The bound of a client built from `server`: the argument, the URL's, or the default.

    `given` is the constructor's `pool_size`. Beside a client of the caller's own
    (`server` None), whose pool is the caller's to bound, it is refused.
    """
    if server is not None:
        return chosen_pool_size(given, server.pool_size, owner=owner, shown=server.shown)
    if given is not None:
        raise ConfigurationError(
            f"{owner}'s pool_size argument ({given!r}) bounds a client built from a URL; "
            "a client of your own keeps its own pool: bound that instead "
            "(redis-py's max_connections, with a BlockingConnectionPool to wait)"
        )
    return DEFAULT_POOL_SIZE


# What an operator must fix when a server that answers refuses a command anyway.
# The first matching class wins, so subclasses come before ResponseError.
_MISCONFIGURATION_HINTS: Final[tuple[tuple[type[RedisError], str], ...]] = (
    (ReadOnlyError, "the URL points at a read-only replica; point it at the primary"),
    (
        NoPermissionError,
        "the Redis user lacks an ACL permission; it needs GET, SET, DEL, PEXPIRE, INCR, "
        "EVALSHA and SCRIPT LOAD on the keys firefly:scheduling:* "
        "({firefly:scheduling:* on a cluster)",
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
