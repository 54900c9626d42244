"""`MemcachedLock`: a lease per name, kept as a memcached item that the server expires.

A lock is an item holding this acquisition's owner token, stored with `add` (which
fails when the item exists) and an expiry, so memcached itself frees it when the
TTL passes. Release and renewal read the item with its CAS value (`gets`) and act
only if it still holds the token and has not changed since: release with the meta
protocol's `md <key> C<cas>`, renewal with `cas`. A late release never frees a
newer holder, and nothing ever deletes blindly.

Limits, stated once here and in the docs page:

* memcached is a cache. Under memory pressure it evicts items, held locks
  included, unless started with `-M`; a restart loses every lock; nothing is
  replicated. One server per URL.
* Expiries are whole seconds on a clock that ticks once a second (see
  `server_expiry`). TTLs over 30 days are sent as an absolute Unix time taken from
  this node's clock.
* Fencing counters are items too: see `_fence` for what happens when one is lost.
* The meta commands (`ms`, `ma`, `md`, `mn`) need memcached 1.6.10 or newer.

A fenced acquisition is ONE round trip: the add and the counter increment are
pipelined in one write (see `_acquire_fenced`).
"""

from __future__ import annotations

import functools
import math
import re
import time
from typing import ClassVar, Final

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError, MemcacheError, MemcacheUnknownError

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.locks.connection_url import parse_lock_url
from firefly_scheduling.locks.keys import ServerKeyScheme
from firefly_scheduling.locks.redaction import redact_url, url_secrets
from firefly_scheduling_memcached.connection import SharedClient

URL_SCHEMES: Final = ("memcached",)
DEFAULT_PORT: Final = 11211

#: Bounds every round trip: seconds to connect, and to wait for each send or reply.
CLIENT_DEFAULTS: Final[dict[str, float]] = {"connect_timeout": 3.0, "timeout": 3.0}

#: memcached reads an expiry above this many seconds (30 days) as an absolute Unix time.
MAX_RELATIVE_EXPIRY: Final = 30 * 24 * 3600
#: The expiry field is a signed 32-bit integer: absolute times end in January 2038.
MAX_ABSOLUTE_EXPIRY: Final = 2**31 - 1

# Printable ASCII except the space: legal in a text-protocol key exactly as written.
# Anything else (spaces, control characters, non-ASCII, names too long once prefixed to
# fit 250 bytes) becomes a SHA-256 digest. The hashed prefixes differ from the readable
# ones right after "lock"/"fence", so the two forms can never produce the same key.
_KEY_SAFE: Final = re.compile(r"[!-~]+")
LOCK_KEYS: Final = ServerKeyScheme(
    readable_prefix="firefly:scheduling:lock:",
    hashed_prefix="firefly:scheduling:lock-sha256:",
    max_length=250,
    readable=_KEY_SAFE,
)
FENCE_KEYS: Final = ServerKeyScheme(
    readable_prefix="firefly:scheduling:fence:",
    hashed_prefix="firefly:scheduling:fence-sha256:",
    max_length=250,
    readable=_KEY_SAFE,
)

# Replies to `md <key> C<cas>`: deleted; no such item (expired or evicted); the CAS
# value differs (the item was replaced after our `gets`, so it is not ours to delete).
_META_DELETED: Final = b"HD"
_META_NOT_DELETED: Final = frozenset({b"NF", b"EX"})
# The CAS value of every item on a server started with -C (CAS disabled).
_CAS_DISABLED: Final = b"0"
# Replies to `ms <key> ... ME` (add mode): stored; not stored (the item exists).
_META_STORED: Final = b"HD"
_META_NOT_STORED: Final = b"NS"
# The reply to `mn` (meta no-op), which ends a pipeline so its replies can be read at once.
_META_NOOP: Final = b"MN\r\n"


class MemcachedLock(BaseLock):
    """A memcached lease lock per name; the server frees it when the TTL passes.

    `url` is `memcached://host[:port]` (port 11211 by default): one server, no
    credentials (pymemcache speaks the text protocol, which has none), no path or
    query. Anything else is a `ConfigurationError` at construction. The instance
    keeps one connection behind a mutex (`connection.SharedClient`), so it is
    thread-safe (a pooled client measured slower for the short exchanges a lock
    makes). It opens on first use, is replaced before use when the server has closed
    it, reopens on the call after a failure, and is not the parent's in a forked
    child.
    """

    backend_name: ClassVar[str] = "memcached"
    ttl_honoured: ClassVar[bool] = True
    session_scoped: ClassVar[bool] = False
    supports_fencing: ClassVar[bool] = True
    renewable: ClassVar[bool] = True
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (MemcacheError, OSError)

    def __init__(self, url: str) -> None:
        server = memcached_server(url)
        url = url.strip()
        super().__init__(target=redact_url(url), secrets=url_secrets(url))
        self._client = SharedClient(
            Client(server, no_delay=True, default_noreply=False, **CLIENT_DEFAULTS)
        )

    @staticmethod
    @functools.lru_cache(maxsize=4096)  # names repeat (one per task): skip the regex and digest
    def key(name: str) -> str:
        """The memcached key of the lock `name`: readable when safe, else a SHA-256 digest."""
        return LOCK_KEYS.key(name)

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def fence_key(name: str) -> str:
        """The memcached key of the fencing counter of `name`; it never expires."""
        return FENCE_KEYS.key(name)

    # -- BaseLock hooks -----------------------------------------------------------

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        expire = server_expiry(ttl_seconds, time.time())
        with self._client.exchange() as client:
            return bool(client.add(self.key(name), owner.encode(), expire=expire))

    def _release(self, name: str, owner: str) -> bool:
        key = self.key(name)
        with self._client.exchange() as client:
            value, cas = client.gets(key)
            if value != owner.encode():
                return False
            _require_cas(cas)
            reply = client.raw_command(b"md " + key.encode() + b" C" + cas)
        if reply == _META_DELETED:
            return True
        if reply in _META_NOT_DELETED:
            return False
        raise MemcacheUnknownError(f"unexpected reply to a meta delete: {reply[:32]!r}")

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        key = self.key(name)
        token = owner.encode()
        expire = server_expiry(ttl_seconds, time.time())
        with self._client.exchange() as client:
            value, cas = client.gets(key)
            if value != token:
                return False
            _require_cas(cas)
            # True: stored; False: changed since `gets`; None: gone since `gets`.
            return client.cas(key, token, cas, expire=expire) is True

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        """Add the lock item and increment its counter in one write: one round trip.

        memcached has no multi-command atomicity, but it runs one connection's commands
        in order, so the increment runs after the add, while the new holding is in
        force: its token is greater than every earlier holding's, whose increments all
        ran before that holding was released or expired. The increment runs even when
        the add is refused; that only leaves a gap in the tokens, which need not be
        consecutive. A counter the server cannot increment frees the new holding again.
        """
        key = self.key(name)
        token = owner.encode()
        expire = server_expiry(ttl_seconds, time.time())
        # `ms ... ME` is `add` (mode E); `mn` ends the pipeline with a fixed reply.
        command = b"ms %s %d T%d ME\r\n%s\r\n%s\r\nmn" % (
            key.encode(),
            len(token),
            expire,
            token,
            self._increment_command(name),
        )
        with self._client.exchange() as client:
            reply = client.raw_command(command, end_tokens=_META_NOOP)
        added, _, increment = reply.partition(b"\r\n")
        if added == _META_NOT_STORED:
            return None
        if added != _META_STORED:
            raise MemcacheUnknownError(f"unexpected reply to a meta add: {added[:32]!r}")
        try:
            return _incremented_value(increment)
        except MemcacheError:
            self._release(name, owner)
            raise

    def _fence(self, name: str) -> int:
        """Increment the counter of `name`; one round trip."""
        with self._client.exchange() as client:
            reply = client.raw_command(
                self._increment_command(name) + b"\r\nmn", end_tokens=_META_NOOP
            )
        return _incremented_value(reply)

    def _increment_command(self, name: str) -> bytes:
        """`ma` of the counter of `name`, creating it from the clock when it is missing.

        A counter is an item, so an eviction or a restart can lose it. `N0 J<seed>`
        makes the server create a missing one, atomically, holding the current Unix
        time in microseconds rather than 1, which keeps tokens above every token handed
        out before the loss, as long as fewer than a million fenced acquisitions a
        second were made on the name and the seeding node's clock is not behind by
        more than the counter's age. Nodes racing to create it get one seed, then
        increments. `N0`: the counter never expires.
        """
        seed = time.time_ns() // 1000
        return b"ma %s N0 J%d v" % (self.fence_key(name).encode(), seed)

    def _close(self) -> None:
        self._client.close()


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


def _incremented_value(reply: bytes) -> int:
    """The counter value in a reply to `ma ... v`: a `VA <size>` line, then the value."""
    header, _, rest = reply.partition(b"\r\n")
    value = rest.removesuffix(b"\r\n")
    if not header.startswith(b"VA ") or not value.isdigit():
        raise MemcacheUnknownError(f"unexpected reply to a meta increment: {reply[:64]!r}")
    return int(value)


def _require_cas(cas: bytes) -> None:
    # With CAS disabled, `md <key> C0` deletes whatever the item holds by then: a blind
    # delete. Refuse, so the lock expires at its TTL instead of freeing a newer holder.
    if cas == _CAS_DISABLED:
        raise MemcacheClientError(
            "the memcached server runs with -C, which disables CAS: locks can be neither "
            "released early nor renewed safely; restart it without -C"
        )


def server_expiry(ttl_seconds: float, now: float) -> int:
    """The expiry field for a lease of `ttl_seconds` stored at Unix time `now`.

    memcached's clock ticks once a second, so an item stored with expiry `n` lives
    somewhere between `n - 1` and `n` seconds. Hence the TTL is rounded up to whole
    seconds and one second is added: the lock lives at least `ttl_seconds` and less
    than `ttl_seconds + 2`.

    memcached reads an expiry over 30 days as an absolute Unix time, so a longer TTL
    is sent as `now + ttl_seconds` rounded up. That instant comes from this node's
    clock and is compared with the server's: a skew between them shortens or
    lengthens such a lease by the skew. Absolute times end in January 2038.
    """
    relative = math.ceil(ttl_seconds) + 1
    if relative <= MAX_RELATIVE_EXPIRY:
        return relative
    absolute = math.ceil(now + ttl_seconds)
    if absolute > MAX_ABSOLUTE_EXPIRY:
        raise ConfigurationError(
            f"ttl_seconds={ttl_seconds!r} ends after memcached's last expiry time "
            f"(Unix time {MAX_ABSOLUTE_EXPIRY}, January 2038)"
        )
    return absolute
