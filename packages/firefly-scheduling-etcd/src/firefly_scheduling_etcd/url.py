"""`etcd://` and `etcds://` URLs: where the member is, how long to wait, which certificates.

One parser for every driver (sync today, asyncio next), so a URL means the same thing
to both and is refused the same way, at construction, before anything connects:

* `etcd://host[:port]`: the v3 JSON gateway over plain HTTP (port 2379 by default);
* `etcds://host[:port]`: the same over TLS, verified against the system's CAs unless
  `cacert=` names a CA bundle; `cert=` (and `key=`, when the key is a separate file)
  present a client certificate, which is how an etcd cluster with client-cert
  authentication (`--client-cert-auth`) knows the caller;
* `timeout=` (a duration such as `3s` or `500ms`; default 3 s) bounds each request,
  and a request's wait for a free connection;
* `pool_size=` (default 4) bounds the HTTP connections the lock keeps to the member.

Refused, each with a `ConfigurationError` that shows the URL with any password
replaced by `***`: other schemes, a missing host, a path, unknown or repeated query
options, TLS options on a plain `etcd://` URL, unreadable certificate files, and
credentials (`user:password@`). etcd's user/password authentication issues tokens
that expire and must be renewed; this backend does not implement that yet, and
silently ignoring the credentials would leave the caller believing they are used.

One member per URL. A cluster is reached through any one member (each forwards
writes to the leader); put a load balancer or a DNS name in front of the members
for failover between them.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Final

from firefly_scheduling.concurrency.pool_size import check_pool_size
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.schedule.durations import parse_duration
from firefly_scheduling.urls.connection_url import parse_lock_url, url_options
from firefly_scheduling.urls.redaction import redact_url

URL_SCHEMES: Final = ("etcd", "etcds")
DEFAULT_PORT: Final = 2379
#: The local member, as redis and memcached default to their local servers.
DEFAULT_URL: Final = f"etcd://127.0.0.1:{DEFAULT_PORT}"
#: Seconds. Every request is one round trip, bounded by this (connect, read, write).
DEFAULT_TIMEOUT_SECONDS: Final = 3.0
_TLS_OPTIONS: Final = ("cacert", "cert", "key")
_OPTIONS: Final = ("timeout", "pool_size", *_TLS_OPTIONS)


@dataclass(frozen=True)
class EtcdUrl:
    """A parsed lock URL: where the member's gateway is, and the client options."""

    #: The member's host name or address (an IPv6 address without its brackets).
    host: str
    port: int
    #: The URL as given, for `repr` and messages (it cannot carry a password).
    shown: str
    timeout: float
    tls: bool
    cacert: str | None = None
    cert: str | None = None
    key: str | None = None
    #: `pool_size=` of the URL, or None when it does not set it.
    pool_size: int | None = None

    @property
    def base_url(self) -> str:
        """`http://host:port` or `https://host:port`, where the gateway's `/v3/` lives."""
        netloc_host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{netloc_host}:{self.port}"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of an `etcds://` URL (None for `etcd://`); files are read now."""
        if not self.tls:
            return None
        try:
            context = ssl.create_default_context(cafile=self.cacert)
            if self.cert is not None:
                context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as err:
            raise ConfigurationError(
                f"the etcd lock provider cannot load the TLS files of {self.shown}: "
                f"{type(err).__name__}: {err}"
            ) from None
        return context


def parse_url(url: str) -> EtcdUrl:
    """Parse an `etcd://` or `etcds://` URL, or refuse it (see the module doc)."""
    parts = parse_lock_url(url, provider="etcd", schemes=URL_SCHEMES)
    shown = redact_url(url.strip())
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(
            f"the etcd lock provider cannot use credentials in the URL ({shown}): etcd "
            "user/password authentication is not supported; use a member without it, or "
            "etcds:// with a client certificate (cert=...&key=...)"
        )
    host = parts.hostname
    if not host:
        raise ConfigurationError(f"the etcd lock provider needs a host in the URL ({shown})")
    if parts.path not in ("", "/"):
        # The path is not quoted: in a malformed URL it may hold part of a password.
        raise ConfigurationError(
            f"the etcd lock provider got a path in the URL ({shown}); an etcd URL names a "
            "member only (etcd://host:port), the /v3/ gateway path is added"
        )
    options = url_options(parts.query, provider="etcd", known=_OPTIONS, shown=shown)
    tls = parts.scheme.lower() == "etcds"
    if not tls and (given := [name for name in _TLS_OPTIONS if name in options]):
        raise ConfigurationError(
            f"the etcd lock provider got TLS option {given[0]!r} on a plain etcd:// URL "
            f"({shown}); use etcds:// for TLS"
        )
    if "key" in options and "cert" not in options:
        raise ConfigurationError(
            f"the etcd lock provider got key= without cert= ({shown}); a client key "
            "needs its certificate"
        )
    timeout = DEFAULT_TIMEOUT_SECONDS
    if "timeout" in options:
        timeout = parse_duration(options["timeout"], source=f"timeout= of the etcd URL {shown}")
    pool_size = None
    if "pool_size" in options:
        pool_size = check_pool_size(
            options["pool_size"], source=f"pool_size= of the etcd URL {shown}", text=True
        )
    return EtcdUrl(
        host=host,
        port=parts.port or DEFAULT_PORT,
        shown=shown,
        timeout=timeout,
        tls=tls,
        cacert=options.get("cacert"),
        cert=options.get("cert"),
        key=options.get("key"),
        pool_size=pool_size,
    )
