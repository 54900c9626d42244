"""The one memcached server a lock or anchor store talks to, read from its URL.

`memcached://host[:port]` (port 11211 by default), with one option:

* `pool_size=` bounds the connections a lock keeps to the server (default 4, the
  per-backend bound of docs/scaling.md), so that a deployment configured by URL
  alone (`FIREFLY_SCHEDULING_LOCK_MEMCACHED_URL`, the `run` and `tick` hosts) can set
  it too. The anchor store, which shares the lock's URL, keeps one connection and
  ignores it.

Refused, each with a `ConfigurationError` that shows the URL with any password
masked: other schemes, several servers, credentials (memcached's text protocol has
none), a path or fragment, unknown or repeated options, and a `pool_size` that is not
a whole number of connections, at least 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from firefly_scheduling.concurrency.pool_size import check_pool_size
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.urls.connection_url import parse_lock_url, url_options
from firefly_scheduling.urls.redaction import redact_url

URL_SCHEMES: Final = ("memcached",)
DEFAULT_PORT: Final = 11211
_OPTIONS: Final = ("pool_size",)
_FORM: Final = "memcached://host[:port][?pool_size=N]"

#: Bounds every round trip: seconds to connect, and to wait for each send or reply.
CLIENT_DEFAULTS: Final[dict[str, float]] = {"connect_timeout": 3.0, "timeout": 3.0}


@dataclass(frozen=True)
class MemcachedUrl:
    """A parsed memcached URL: the server, and the lock's options."""

    host: str
    port: int
    #: The URL as given, any password masked, for `repr` and messages.
    shown: str
    #: `pool_size=` of the URL, or None when it does not set it.
    pool_size: int | None = None

    @property
    def server(self) -> tuple[str, int]:
        """`(host, port)`, as the drivers take it."""
        return self.host, self.port


def parse_url(url: str) -> MemcachedUrl:
    """Parse a memcached URL, or refuse it (see the module doc); never connects."""
    if isinstance(url, str) and "," in url:
        raise ConfigurationError(
            f"the memcached lock provider takes one server, got {redact_url(url)}: a lock "
            "must live on a single server, so spreading keys over several is not supported"
        )
    parts = parse_lock_url(url, provider="memcached", schemes=URL_SCHEMES)
    shown = redact_url(url.strip())
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"the memcached lock provider got credentials in {shown}, but memcached's text "
            "protocol has no authentication; remove them"
        )
    if parts.path not in ("", "/") or parts.fragment:
        raise ConfigurationError(f"the memcached lock provider expects {_FORM}, got {shown}")
    if not parts.hostname:
        raise ConfigurationError(f"the memcached lock provider needs a host, got {shown}")
    options = url_options(parts.query, provider="memcached", known=_OPTIONS, shown=shown)
    pool_size = None
    if "pool_size" in options:
        pool_size = check_pool_size(
            options["pool_size"], source=f"pool_size= of the memcached URL {shown}", text=True
        )
    return MemcachedUrl(parts.hostname, parts.port or DEFAULT_PORT, shown, pool_size)


def memcached_server(url: str) -> tuple[str, int]:
    """The `(host, port)` of a memcached URL, or a `ConfigurationError`."""
    return parse_url(url).server
