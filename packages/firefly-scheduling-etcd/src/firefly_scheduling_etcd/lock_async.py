"""`AsyncEtcdLock`: a lease per acquisition, with fencing tokens from etcd's own revision.

A thin driver: every rule of the lock (keys, leases, the create-if-absent
transaction, owner checks, fencing from `create_revision`) lives in `protocol`, which
this class pumps over connections to etcd's v3 JSON gateway (`asyncio_gateway`: httpx;
the synchronous twin's `gateway`: the standard library's `http.client`). The round
trips of each operation are listed in `protocol`. Written once, for asyncio, in
`lock_async.py`; the synchronous `EtcdLock` in `lock.py` is generated from
it by `tools/async_to_sync.py`, and the two exclude each other on the same name.

Limits, stated once here and in the docs page:

* The TTL runs on the etcd leader's clock, in whole seconds (rounded up), and is
  never shorter than the server's minimum lease TTL (1.5 election timeouts, rounded
  up: 2 s by default). A new leader (an election, a restart) restarts every lease's
  TTL in full, so a lock can outlive its TTL by up to one TTL across a failover.
* An etcd lock alone does not make a paused process safe (Jepsen, etcd 3.4.3, 2020):
  a holder stopped past its lease keeps running when it resumes. Stamp writes with
  the fencing token (`try_acquire_fenced`) and let the guarded resource refuse
  older tokens.
* One member per URL (see `url`); user/password authentication is refused.
"""

# async-to-sync: rename AsyncEtcdLock EtcdLock
# async-to-sync: rename AsyncGatewayConnection GatewayConnection
# async-to-sync: rename firefly_scheduling_etcd.asyncio_gateway firefly_scheduling_etcd.gateway
# async-to-sync: rename AsyncPoolGate PoolGate
# async-to-sync: rename grouped_async grouped
# async-to-sync: rename AsyncGroupedCalls GroupedCalls
# async-to-sync: rename AsyncReleaseWatch ReleaseWatch
# async-to-sync: rename AsyncTicketQueue TicketQueue

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar, TypeVar

from firefly_scheduling.concurrency.grouped_async import AsyncGroupedCalls
from firefly_scheduling.concurrency.pool_gate_async import AsyncPoolGate
from firefly_scheduling.concurrency.pool_size import chosen_pool_size
from firefly_scheduling.locks.holding import new_owner_token
from firefly_scheduling.locks.ticket_queue_async import (
    TICKET_GRACE_SECONDS,
    AsyncTicketQueue,
    Taken,
)
from firefly_scheduling.locks.waiting_async import Backoff
from firefly_scheduling_etcd import batch_leases, messages, protocol, waiter_queue
from firefly_scheduling_etcd.asyncio_gateway import AsyncGatewayConnection
from firefly_scheduling_etcd.batch_holdings import BatchHoldings
from firefly_scheduling_etcd.messages import EtcdServerError
from firefly_scheduling_etcd.protocol import Operation
from firefly_scheduling_etcd.release_watch_async import AsyncReleaseWatch
from firefly_scheduling_etcd.url import parse_url

T = TypeVar("T")

#: The longest pause a ticket's lease covers, when the waiters' recheck is longer: a
#: waiter sleeping past it loses its place and queues again, at the end.
LONGEST_TICKET_PAUSE_SECONDS = 60.0
#: The share of its TTL a waiter's lease granted ahead may have run before an attempt
#: refreshes it: a holding won on it starts with at most this share of its TTL run.
FRESH_LEASE_SHARE = 0.1


class AsyncEtcdLock(AsyncTicketQueue):
    """An etcd lease lock per name; the cluster frees it when the lease's TTL passes.

    `url` is `etcd://host:port` or `etcds://host:port` (see `url` for the
    options). Construction checks the URL and reads any TLS files but does not
    connect. Safe for concurrent use, over at most `pool_size` connections (the
    argument, else `?pool_size=` of the URL, else 4): each operation borrows one of
    `pool_size` connections for all its round trips, and an operation beyond them
    waits for one, up to the URL's `timeout`, then fails with a `LockBackendError`
    naming the bound. Connections are never shared by two requests at once (an
    httpx pool shared by threads could close a connection that another thread was
    reading a response on: "Bad file descriptor", httpcore 1.0.9). Proxy variables
    of the environment (`HTTP_PROXY`...) are ignored: lock traffic goes to the
    member named in the URL.

    Waiting acquisitions are woken by a watch of their key's deletion, and served in
    arrival order across processes by etcd's own lock recipe (`waiter_queue`): a
    ticket key per waiter on a short lease, ordered by create revision. A woken
    waiter checks its place and takes the name in one transaction.
    """

    backend_name: ClassVar[str] = "etcd"
    ttl_honoured: ClassVar[bool] = True
    session_scoped: ClassVar[bool] = False
    supports_fencing: ClassVar[bool] = True
    renewable: ClassVar[bool] = True
    batch_acquires = True
    notified_wait: ClassVar[bool] = True
    driver_errors: ClassVar[tuple[type[BaseException], ...]] = (
        *AsyncGatewayConnection.errors,
        EtcdServerError,
    )

    def __init__(self, url: str, *, pool_size: int | None = None) -> None:
        member = parse_url(url)
        super().__init__(target=member.shown)
        #: The most connections the lock opens to the member.
        self.pool_size = chosen_pool_size(
            pool_size, member.pool_size, owner="the etcd lock", shown=member.shown
        )
        self._gate = AsyncPoolGate(self.pool_size, wait_seconds=member.timeout)
        context = member.ssl_context()
        #: The connections not lent out; an operation holding a slot of the gate takes one.
        self._idle = [AsyncGatewayConnection(member, context) for _ in range(self.pool_size)]
        self._connections = tuple(self._idle)
        #: The waiters' one watch of the lock keys' deletions (`_release_signal`).
        self._watch = AsyncReleaseWatch(member, context)
        #: The waits whose lease was granted ahead (`_prepare_wait`): owner token -> when
        #: (monotonic) the lease last started, by the client's clock before sending.
        self._wait_leases: dict[str, float] = {}
        #: The holdings still on the lease of the batch they were taken in.
        self._batch_holdings = BatchHoldings()
        #: Releases of batch holdings waiting for one another, sent together.
        self._shared_releases: AsyncGroupedCalls[tuple[str, str], bool] = AsyncGroupedCalls(
            self._release_shared_together, most=batch_leases.NAMES_PER_TXN
        )

    # -- AsyncBaseLock hooks -----------------------------------------------------------

    async def _acquire(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return await self._acquire_token(name, owner, ttl_seconds) is not None

    async def _acquire_fenced(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        return await self._acquire_token(name, owner, ttl_seconds)

    async def _acquire_token(self, name: str, owner: str, ttl_seconds: float) -> int | None:
        """One acquisition (`protocol.acquire`). A waiter woken by its key's deletion
        skips the read: the key is likely free, and the create checks it anyway.

        A waiter's lease granted ahead (`_prepare_wait`) is refreshed first only once
        more than `FRESH_LEASE_SHARE` of its TTL has run since it last started; until
        then the create alone is sent, and the holding counts its TTL from the lease's
        start (`_lease_started`), so it starts with at most that share run.
        """
        read_first = not self._watch.take_deleted(protocol.lock_key(name))
        granted = owner in self._wait_leases
        sent, refresh = self._refresh_due(owner, ttl_seconds)
        token = await self._run(
            protocol.acquire(
                name,
                owner,
                ttl_seconds,
                read_first=read_first,
                granted=granted,
                refresh=refresh,
            )
        )
        if token is not None and granted and refresh:
            self._wait_leases[owner] = sent  # refreshed (or granted again) after `sent`
        return token

    def _refresh_due(self, owner: str, ttl_seconds: float) -> tuple[float, bool]:
        """Now, before sending, and whether the owner's lease must be refreshed first:
        it was not granted ahead, or more than `FRESH_LEASE_SHARE` of its TTL has run."""
        sent = time.monotonic()
        started = self._wait_leases.get(owner)
        return sent, started is None or sent - started > ttl_seconds * FRESH_LEASE_SHARE

    async def _claim_many(self, claims: Sequence[tuple[str, float]]) -> list[bool | BaseException]:
        """The claims of an instant in 1 to 3 round trips per 64 (`batch_leases.claim_many`)."""
        if not claims:
            return []
        return list(await self._run(batch_leases.claim_many(claims, new_owner_token())))

    async def _acquire_many(
        self, requests: Sequence[tuple[str, str, float]], *, fenced: bool
    ) -> list[int | bool | BaseException | None]:
        """A won instant's task locks, on one lease per TTL (`batch_leases.acquire_many`).

        A grant per TTL, then one transaction per 64 names, where one by one each
        name cost three round trips.
        """
        if not requests:
            return []
        started = time.monotonic()  # as the holdings' own deadlines: before sending
        tokens = await self._run(batch_leases.acquire_many(requests, new_owner_token()))
        self._batch_holdings.add(
            (owner, started + ttl_seconds)
            for (_, owner, ttl_seconds), token in zip(requests, tokens, strict=True)
            if token is not None
        )
        return list(tokens) if fenced else [token is not None for token in tokens]

    async def _release(self, name: str, owner: str) -> bool:
        deadline = self._batch_holdings.take(owner)
        if deadline is None:
            return await self._run(protocol.release(owner))
        try:
            return await self._shared_releases.call((name, owner))
        except BaseException:
            self._batch_holdings.put_back(owner, deadline)  # a later release tries again
            raise

    async def _release_shared_together(self, held: Sequence[tuple[str, str]]) -> list[bool]:
        """The releases of batch holdings that waited for one another: one transaction.

        A resident node ends the fires of an instant together; one owner-checked
        delete each was a Raft write each (`batch_leases.release_shared_many`). A lone
        release is sent alone, as the single delete.
        """
        if len(held) == 1:
            return [await self._run(batch_leases.release_shared(*held[0]))]
        return await self._run(batch_leases.release_shared_many(held))

    async def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        deadline = self._batch_holdings.take(owner)
        if deadline is None:
            return await self._run(protocol.renew(name, owner, ttl_seconds))
        try:
            return await self._run(batch_leases.renew_shared(name, owner, ttl_seconds))
        except BaseException:
            self._batch_holdings.put_back(owner, deadline)  # where its key is is unknown
            raise

    @asynccontextmanager
    async def _release_signal(self, name: str, wake: Any) -> AsyncIterator[None]:
        """Woken by the deletion of the name's key: a release or an expiry (`release_watch`)."""
        async with self._watch.notified(protocol.lock_key(name), wake):
            yield

    async def _pause_after_loss(self, name: str, backoff: Backoff) -> float:
        """Watched: until the key's deletion wakes the waiter, at most
        `notified_recheck_seconds`; else (no watch) the backoff's next pause."""
        return self.notified_recheck_seconds if self._watch.live else backoff.next()

    async def _prepare_wait(self, name: str, ttl_seconds: float) -> str | None:
        """Grant the lease of the wait's later attempts now, so that after a release
        only the create remains."""
        owner = new_owner_token()
        sent = time.monotonic()
        try:
            await self._run(protocol.grant(owner, ttl_seconds))
        except BaseException:
            # The grant may have been applied and only its reply lost.
            await self._end_wait(name, owner, won=False)
            raise
        self._wait_leases[owner] = sent
        return owner

    async def _end_wait(self, name: str, owner: str, *, won: bool) -> None:
        """Forget the wait's lease; revoke it if the wait ended without the lock."""
        self._wait_leases.pop(owner, None)
        if not won:
            await self._undo_interrupted(name, owner)

    def _lease_started(self, owner: str) -> float | None:
        return self._wait_leases.get(owner)

    # -- the waiters' queue (`waiter_queue`) ----------------------------------------------

    async def _take_when_first(
        self, name: str, owner: str, ttl_seconds: float, *, fenced: bool
    ) -> int | bool | None:
        token = await self._acquire_token(name, owner, ttl_seconds)
        return token if fenced else token is not None

    def ticket_seconds(self) -> float:
        """A waiter sleeps up to `notified_recheck_seconds` between attempts."""
        pause = min(self.notified_recheck_seconds, LONGEST_TICKET_PAUSE_SECONDS)
        return pause + TICKET_GRACE_SECONDS

    async def _take_if_first(
        self, name: str, spot: object | None, owner: str, ttl_seconds: float, *, fenced: bool
    ) -> Taken:
        """A queued waiter woken by its key's deletion, on its lease granted ahead, checks
        its place and takes the name in one transaction that deletes its ticket with
        the win (`waiter_queue.take_if_first`): after a release, one Raft write. Else
        the queue's head is read, then the name (both reads while it is likely held)."""
        if (
            spot is None
            or owner not in self._wait_leases
            or not self._watch.take_deleted(protocol.lock_key(name))
        ):
            return await super()._take_if_first(name, spot, owner, ttl_seconds, fenced=fenced)
        sent, refresh = self._refresh_due(owner, ttl_seconds)
        first, token = await self._run(
            waiter_queue.take_if_first(name, _queued(spot), owner, ttl_seconds, refresh=refresh)
        )
        if token is not None and refresh:
            self._wait_leases[owner] = sent  # refreshed (or granted again) after `sent`
        won = token is not None
        return Taken(first=first, answer=token if fenced else won, left=won)

    async def _join_queue(self, name: str, ticket: str, seconds: float) -> object:
        return await self._run(waiter_queue.join(name, ticket, seconds))

    async def _keep_place(self, name: str, spot: object, seconds: float) -> bool:
        return await self._run(waiter_queue.keep(_queued(spot).ticket))

    async def _first_in_queue(self, name: str, spot: object | None) -> bool:
        ticket = None if spot is None else _queued(spot).ticket
        return await self._run(waiter_queue.first(name, ticket))

    async def _leave_queue(self, name: str, spot: object) -> None:
        await self._run(waiter_queue.leave(_queued(spot).ticket))

    async def _close(self) -> None:
        await self._watch.aclose()
        for connection in self._connections:
            await connection.aclose()

    def _describe(self, err: BaseException) -> str:
        described = super()._describe(err)
        advice = messages.hint(err)
        return f"{described} ({advice})" if advice else described

    # -- the driver ---------------------------------------------------------------

    async def _run(self, operation: Operation[T]) -> T:
        """Send each call the operation yields, on one borrowed connection; throw errors into it.

        The connection is held for all the operation's round trips, so a caller waits
        for one once per operation, not once per round trip.
        """
        async with self._gate.slot():
            # A slot guarantees an idle connection: there are as many as slots.
            connection = self._idle.pop()
            try:
                return await self._pump(operation, connection)
            finally:
                self._idle.append(connection)

    async def _pump(self, operation: Operation[T], connection: AsyncGatewayConnection) -> T:
        try:
            call = next(operation)
            while True:
                try:
                    reply = await connection.post(call)
                except self.driver_errors as err:
                    call = operation.throw(err)
                else:
                    call = operation.send(reply)
        except StopIteration as finished:
            result: T = finished.value
            return result


def _queued(spot: object) -> waiter_queue.Queued:
    assert isinstance(spot, waiter_queue.Queued)  # as `_join_queue` returned it
    return spot
