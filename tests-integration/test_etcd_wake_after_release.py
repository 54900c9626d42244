"""An etcd waiter woken by a release: its win is one request, and the server agrees.

The waiter's queue (`waiter_queue`) must not lengthen the hand-over: after the
holder's release, a queued waiter first in line sends one transaction that checks
its place, creates the lock key and deletes its ticket. A check of the queue's
head, the create and then the ticket lease's revocation were three sequential
requests, two of them Raft writes, and the wake-up's tail grew with them. The
requests are counted on the waiter's own connections; what the server holds after
the win is read by a second client.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_etcd import EtcdLock, protocol, waiter_queue
from firefly_scheduling_etcd.messages import Call, Reply
from firefly_scheduling_etcd.url import parse_url


@pytest.fixture
def gateway(etcd_url: str) -> Iterator[httpx.Client]:
    """A plain client of the member's JSON gateway: the server's view, not the lock's."""
    with httpx.Client(base_url=parse_url(etcd_url).base_url, trust_env=False) as client:
        yield client


def read_range(
    gateway: httpx.Client, key: bytes, range_end: bytes | None = None
) -> list[dict[str, Any]]:
    """The key-values of `key` (or of [key, range_end)) on the server."""
    request = {"key": base64.b64encode(key).decode()}
    if range_end is not None:
        request["range_end"] = base64.b64encode(range_end).decode()
    reply = gateway.post("/v3/kv/range", json=request)
    reply.raise_for_status()
    kvs: list[dict[str, Any]] = reply.json().get("kvs") or []
    return kvs


def queued_tickets(gateway: httpx.Client, name: str) -> int:
    prefix = waiter_queue.queue_prefix(name)
    return len(read_range(gateway, prefix, prefix[:-1] + bytes([prefix[-1] + 1])))


def sent_paths(lock: EtcdLock) -> list[tuple[str, int]]:
    """Records each request the lock's connections send: its path and when (ns) it started."""
    sent: list[tuple[str, int]] = []

    def recording(post: Callable[[Call], Reply]) -> Callable[[Call], Reply]:
        def recorded(call: Call) -> Reply:
            sent.append((call.path, time.monotonic_ns()))
            return post(call)

        return recorded

    for connection in lock._connections:
        connection.post = recording(connection.post)  # type: ignore[method-assign,assignment]
    return sent


def test_a_queued_waiter_wins_after_a_release_with_one_request(
    etcd_url: str, gateway: httpx.Client
) -> None:
    holder, waiter = EtcdLock(etcd_url), EtcdLock(etcd_url)
    waiter.notified_recheck_seconds = 60.0  # only the release wakes it
    try:
        name = f"wake-{uuid.uuid4().hex}"
        held = holder.acquire(name, 30)
        assert held is not None
        sent = sent_paths(waiter)
        won: list[tuple[Holding | None, int]] = []

        def wait() -> None:
            holding = waiter.acquire(name, 30, wait=30, fenced=True)
            won.append((holding, time.monotonic_ns()))

        thread = threading.Thread(target=wait)
        thread.start()
        # Queued on the server, and its lease granted ahead: the last request it sends
        # before it sleeps.
        while queued_tickets(gateway, name) == 0 or sent[-1][0] != "/v3/lease/grant":
            time.sleep(0.01)
            assert thread.is_alive()
        before = len(sent)
        released_at = time.monotonic_ns()
        holder.release_holding(held)
        thread.join(30)
        holding, won_at = won[0]
        assert holding is not None
        after_release = [path for path, at in sent[before:] if released_at <= at <= won_at]
        assert after_release == ["/v3/kv/txn"]
        # The server: the key is the waiter's, created by that transaction; no ticket left.
        [key] = read_range(gateway, protocol.lock_key(name))
        assert base64.b64decode(key["value"]).decode() == holding.owner
        assert int(key["create_revision"]) == holding.fence
        assert queued_tickets(gateway, name) == 0
        waiter.release_holding(holding)
    finally:
        waiter.close()
        holder.close()


def test_a_woken_waiter_behind_an_older_ticket_leaves_the_name_free(
    etcd_url: str, gateway: httpx.Client
) -> None:
    """The one transaction keeps the queue's order: an older ticket (planted by a second
    client, as a waiter of another process) makes it fail, and the name stays free."""
    holder, waiter = EtcdLock(etcd_url), EtcdLock(etcd_url)
    waiter.notified_recheck_seconds = 60.0  # only the release wakes it
    name = f"wake-{uuid.uuid4().hex}"
    older = waiter_queue.ticket_key(name, "planted")
    try:
        held = holder.acquire(name, 30)
        assert held is not None
        put = {"key": base64.b64encode(older).decode(), "value": ""}
        gateway.post("/v3/kv/put", json=put).raise_for_status()
        sent = sent_paths(waiter)
        outcome: list[Holding | None] = []
        thread = threading.Thread(
            target=lambda: outcome.append(waiter.acquire(name, 30, wait=3, fenced=True))
        )
        thread.start()
        while queued_tickets(gateway, name) < 2 or sent[-1][0] != "/v3/lease/grant":
            time.sleep(0.01)
            assert thread.is_alive()
        before = len(sent)
        holder.release_holding(held)
        while len(sent) == before:
            time.sleep(0.01)
            assert thread.is_alive()
        thread.join(30)
        assert outcome == [None]  # woken, lost to the older ticket, then timed out
        assert sent[before][0] == "/v3/kv/txn"  # the first request after the release
        assert read_range(gateway, protocol.lock_key(name)) == []
        assert queued_tickets(gateway, name) == 1  # the planted one; the waiter's left
    finally:
        gateway.post("/v3/kv/deleterange", json={"key": base64.b64encode(older).decode()})
        waiter.close()
        holder.close()
