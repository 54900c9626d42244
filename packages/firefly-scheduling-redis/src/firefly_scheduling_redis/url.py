"""A Redis lock URL, checked at construction: which server, which options, what to show.

`redis://`, `rediss://` and `unix://` name one server (a Sentinel-managed primary is
reached through a client of the caller's own); `redis+cluster://` and
`rediss+cluster://` name a Redis Cluster through one of its nodes. Query options are
checked here the way redis-py will read them, so a typo fails when the lock is built,
not on its first command; `pool_size=` is ours. Credentials never reach a message:
the URL is shown redacted, and its secrets are kept to scrub from driver messages.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.connection import parse_url as redis_py_parse_url

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


def pool_size_of(server: ServerUrl | None, given: int | None, *, owner: str) -> int:
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
