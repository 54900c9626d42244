# Generated from lock_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`MemcachedLock`: a lease per name, kept as a memcached item that the server expires.

A thin driver: every rule of the lock (keys, expiry fields, the commands, the
owner and CAS checks, fencing) lives in `protocol`, which this class pumps over a
pooled connection (`pool_async.py`, `pool.py`). Written once, for asyncio, in
`lock_async.py`; the synchronous `MemcachedLock` in `lock.py` is generated
from it by `tools/async_to_sync.py`, and the two exclude each other on the same name.
No third-party client: none speaks the meta commands with CAS over asyncio, and the
few commands a lock needs are short.

A lock is an item holding this acquisition's owner token, added only if absent and
with an expiry, so memcached itself frees it when the TTL passes. Release and
renewal read the item with its CAS value and act only if it still holds the token
and has not changed since. A late release never frees a newer holder, and nothing
ever deletes blindly.

Limits, stated once here and in the docs page:

* memcached is a cache. Under memory pressure it evicts items, held locks
  included, unless started with `-M`; a restart loses every lock; nothing is
  replicated. One server per URL.
* Expiries are whole seconds on a clock that ticks once a second (see
  `protocol.server_expiry`). TTLs over 30 days are sent as an absolute Unix time
  taken from this node's clock.
* Fencing counters are items too: see `protocol.increment_command` for what happens
  when one is lost.
* The meta commands (`mg`, `ma`, `md`) need memcached 1.6.10 or newer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, TypeVar

from firefly_scheduling.concurrency.pool_size import chosen_pool_size
from firefly_scheduling.locks.holding import new_owner_token
from firefly_scheduling.locks.ticket_queue import TicketQueue
from firefly_scheduling.urls.redaction import redact_url, url_secrets
from firefly_scheduling_memcached import protocol, waiter_queue
from firefly_scheduling_memcached.pool import Pool
from firefly_scheduling_memcached.protocol import Operation
from firefly_scheduling_memcached.replies import MemcachedError, MemcachedServerError
from firefly_scheduling_memcached.url import CLIENT_DEFAULTS, parse_url

T = TypeVar("T")


class MemcachedLock(TicketQueue):
    """A memcached lease lock per name; the server frees it when the TTL passes.

    `url` is `memcached://host[:port][?pool_size=N]` (port 11211 by default): one
    server, no credentials (memcached's text protocol has none), no path, no other
    option (see `url`). Anything else is a `ConfigurationError` at construction,
    which never connects.

    Safe for concurrent use: each operation borrows a connection from a pool of at
    most `pool_size` connections (the argument, else `?pool_size=` of the URL, else
    4, the per-backend bound of docs/scaling.md; both given and different is
    refused), opened on demand and reused; callers beyond that wait for a connection
    to come back. Connecting takes at most 3 seconds, and so
    does each operation's round trips together (asyncio) or each send and each read
    (blocking sockets); see `CLIENT_DEFAULTS`. Fork-safe: a child process opens
    connections of its own.

    Waiting acquisitions poll with the core's backoff, in a queue of expiring tickets
    per name (`waiter_queue`, `locks.ticket_queue_async`), so waiters of every process
    are served in arrival order.
    """

    backend_name: ClassVar[str] = "memcached"
    ttl_honoured: ClassVar[bool] = True
    session_scoped: ClassVar[bool] = False
    supports_fencing: ClassVar[bool] = True
    renewable: ClassVar[bool] = True
    # TimeoutError (asyncio's too) and the connection errors are OSErrors.
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (MemcachedError, OSError)
    #: `acquire_many` sends its acquisitions together (`protocol.together`).
    batch_acquires = True

    key = staticmethod(protocol.lock_key)
    fence_key = staticmethod(protocol.fence_key)

    def __init__(self, url: str, *, pool_size: int | None = None) -> None:
        server = parse_url(url)
        url = url.strip()
        self.pool_size = chosen_pool_size(
            pool_size, server.pool_size, owner="the memcached lock", shown=server.shown
        )
        super().__init__(target=redact_url(url), secrets=url_secrets(url))
        self._pool = Pool(
            server.server,
            size=self.pool_size,
            connect_timeout=CLIENT_DEFAULTS["connect_timeout"],
            timeout=CLIENT_DEFAULTS["timeout"],
        )

    # -- BaseLock hooks -----------------------------------------------------------

    def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return self._run(protocol.acquire(name, owner, ttl_seconds))

    def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        return self._run(protocol.acquire_fenced(name, owner, ttl_seconds))

    def _acquire_many(
        self, requests: Sequence[tuple[str, str, float]], *, fenced: bool
    ) -> list[int | bool | BaseException | None]:
        """Every acquisition on one connection, sent together (`protocol.together`)."""
        if not requests:
            return []
        if fenced:
            fenced_ones = [protocol.acquire_fenced(*request) for request in requests]
            return list(self._run(protocol.together(fenced_ones)))
        plain = [protocol.acquire(*request) for request in requests]
        return list(self._run(protocol.together(plain)))

    def _claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | BaseException]:
        """Every claim's `add`, with a throwaway owner token, sent together: one round trip
        for up to `protocol.BATCH_OPERATIONS` claims."""
        if not claims:
            return []
        adds = [protocol.acquire(name, new_owner_token(), seconds) for name, seconds in claims]
        return list(self._run(protocol.together(adds)))

    def _fence(self, name: str) -> int:
        return self._run(protocol.fence(name))

    def _release(self, name: str, owner: str) -> bool:
        return self._run(protocol.release(name, owner))

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return self._run(protocol.renew(name, owner, ttl_seconds))

    def _close(self) -> None:
        self._pool.close()

    # -- the waiters' queue (`waiter_queue`) ----------------------------------------------

    def _take_when_first(
        self, name: str, owner: str, ttl_seconds: float, *, fenced: bool
    ) -> int | bool | None:
        if fenced:
            return self._run(protocol.acquire_fenced(name, owner, ttl_seconds))
        return self._run(protocol.acquire(name, owner, ttl_seconds))

    def _join_queue(self, name: str, ticket: str, seconds: float) -> object:
        number = self._run(waiter_queue.join(name, ticket, seconds))
        return waiter_queue.Queued(ticket, number)

    def _keep_place(self, name: str, spot: object, seconds: float) -> bool:
        queued = _spot(spot)
        return self._run(waiter_queue.keep(name, queued.number, queued.ticket, seconds))

    def _first_in_queue(self, name: str, spot: object | None) -> bool:
        number = None if spot is None else _spot(spot).number
        return self._run(waiter_queue.first(name, number))

    def _leave_queue(self, name: str, spot: object) -> None:
        self._run(waiter_queue.leave(name, _spot(spot).number))

    # -- the driver ---------------------------------------------------------------------

    def _run(self, operation: Operation[T]) -> T:
        """Pump `operation` over one pooled connection, kept for all its round trips.

        A connection comes back to the pool only when the exchange ended in step with
        the server: after a result, or a whole `SERVER_ERROR` reply. A transport error,
        a timeout or a cancellation may leave half a reply behind: discarded.
        """
        pool = self._pool
        connection = pool.take()
        try:
            request = next(operation)
            while True:
                replies = connection.exchange(request)
                try:
                    request = operation.send(replies)
                except StopIteration as finished:
                    result: T = finished.value
                    break
        except MemcachedServerError:
            pool.give_back(connection)
            raise
        except BaseException:
            pool.discard(connection)
            raise
        pool.give_back(connection)
        return result


def _spot(spot: object) -> waiter_queue.Queued:
    assert isinstance(spot, waiter_queue.Queued)  # as `_join_queue` returned it
    return spot
