"""The one memcached server a lock or anchor store talks to, read from its URL."""

from __future__ import annotations

from typing import Final

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.urls.connection_url import parse_lock_url
from firefly_scheduling.urls.redaction import redact_url

URL_SCHEMES: Final = ("memcached",)
DEFAULT_PORT: Final = 11211

#: Bounds every round trip: seconds to connect, and to wait for each send or reply.
CLIENT_DEFAULTS: Final[dict[str, float]] = {"connect_timeout": 3.0, "timeout": 3.0}


def memcached_server(url: str) -> tuple[str, int]:
    """The `(host, port)` of a `memcached://host[:port]` URL, or a `ConfigurationError`."""
    if isinstance(url, str) and "," in url:
        raise ConfigurationError(
            f"the memcached lock provider takes one server, got {redact_url(url)}: a lock "
            "must live on a single server, so spreading keys over several is not supported"
        )
    parts = parse_lock_url(url, provider="memcached", schemes=URL_SCHEMES)
    shown = redact_url(url)
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"the memcached lock provider got credentials in {shown}, but memcached's text "
            "protocol has no authentication; remove them"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigurationError(
            f"the memcached lock provider expects memcached://host[:port], got {shown}"
        )
    if not parts.hostname:
        raise ConfigurationError(f"the memcached lock provider needs a host, got {shown}")
    return parts.hostname, parts.port or DEFAULT_PORT
