"""etcd takes the fire claims of an instant together, read from the server by a second client.

`EtcdLock.try_claim_many` reads every name in one read-only transaction, grants one
lease per distinct TTL, and creates each free key in a nested create-if-absent
transaction of one transaction, at most 64 per transaction (`batch_leases.claim_many`).
A second client (the gateway, over plain HTTP) checks:

* 200 fresh claims are all won, every key attached to ONE lease whose TTL covers
  the claim, created by four transactions (64 + 64 + 64 + 8);
* names another node holds are lost, and keep that node's value and lease; the
  free ones of the same batch are won;
* a batch that loses every name writes nothing: the store's revision is unchanged;
* two TTLs in one batch get a lease each;
* the task locks of a won instant, taken together (`acquire_many`), share a lease
  per TTL too, but are released each on its own (owner-checked deletes), and a
  renewal moves its key to a lease of its own instead of keeping the batch's alive;
* releases that wait for one another are one transaction (the store's revision moves
  by one), each answered on its own: a holding whose key was taken over is answered
  lost, and the new holder's key stays.
"""

from __future__ import annotations

import base64
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_etcd import EtcdLock
from firefly_scheduling_etcd.protocol import lease_id, lock_key
from firefly_scheduling_etcd.url import parse_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grouped_senders import send_as_one_group

#: Counts or changes what the whole server does: runs alone under xdist.
pytestmark = pytest.mark.alone


@pytest.fixture
def gateway(etcd_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=parse_url(etcd_url).base_url, timeout=10) as client:
        yield client


@pytest.fixture
def lock(etcd_url: str) -> Iterator[EtcdLock]:
    instance = EtcdLock(etcd_url)
    yield instance
    instance.close()


def _names(tag: str, count: int) -> list[str]:
    stamp = time.time_ns()
    return [f"claims-{tag}-{stamp}-{index}" for index in range(count)]


def _stored(gateway: httpx.Client, name: str) -> dict[str, Any] | None:
    key = base64.b64encode(lock_key(name)).decode()
    kvs = gateway.post("/v3/kv/range", json={"key": key}).json().get("kvs", [])
    return kvs[0] if kvs else None


def _revision(gateway: httpx.Client) -> int:
    return int(gateway.post("/v3/kv/range", json={"key": "AA=="}).json()["header"]["revision"])


def _ttl_left(gateway: httpx.Client, lease: str) -> int:
    return int(gateway.post("/v3/lease/timetolive", json={"ID": lease}).json()["TTL"])


def test_two_hundred_fresh_claims_share_one_lease_and_four_transactions(
    lock: EtcdLock, gateway: httpx.Client
) -> None:
    names = _names("fresh", 200)
    assert lock.try_claim_many([(name, 30) for name in names]) == [True] * 200
    stored = [_stored(gateway, name) for name in names]
    assert all(entry is not None for entry in stored)
    leases = {entry["lease"] for entry in stored if entry is not None}
    assert len(leases) == 1, leases
    assert 25 <= _ttl_left(gateway, leases.pop()) <= 30
    revisions = {entry["create_revision"] for entry in stored if entry is not None}
    assert len(revisions) == 4, "64 names per transaction: 200 take four"


def test_names_held_elsewhere_are_lost_alone_and_keep_their_holder(
    lock: EtcdLock, etcd_url: str, gateway: httpx.Client
) -> None:
    names = _names("mixed", 10)
    other = EtcdLock(etcd_url)
    try:
        for name in names[::2]:
            assert other.try_acquire(name, 30)
        before = {name: _stored(gateway, name) for name in names[::2]}
        answers = lock.try_claim_many([(name, 30) for name in names])
        assert answers == [index % 2 == 1 for index in range(10)]
        for name in names[::2]:
            assert _stored(gateway, name) == before[name], "a lost claim changed the key"
        won = [_stored(gateway, name) for name in names[1::2]]
        assert len({entry["lease"] for entry in won if entry is not None}) == 1
        for name in names[::2]:
            other.release(name)
    finally:
        other.close()


def test_a_batch_that_loses_every_name_writes_nothing(
    lock: EtcdLock, etcd_url: str, gateway: httpx.Client
) -> None:
    names = _names("lost", 20)
    assert lock.try_claim_many([(name, 30) for name in names]) == [True] * 20
    loser = EtcdLock(etcd_url)
    try:
        revision = _revision(gateway)
        assert loser.try_claim_many([(name, 30) for name in names]) == [False] * 20
        assert _revision(gateway) == revision, "a lost batch made a Raft write"
    finally:
        loser.close()


def test_each_ttl_of_a_batch_gets_its_own_lease(lock: EtcdLock, gateway: httpx.Client) -> None:
    names = _names("ttls", 6)
    claims = [(name, 10 if index < 3 else 40) for index, name in enumerate(names)]
    assert lock.try_claim_many(claims) == [True] * 6
    stored = [_stored(gateway, name) for name in names]
    short = {entry["lease"] for entry in stored[:3] if entry is not None}
    long = {entry["lease"] for entry in stored[3:] if entry is not None}
    assert len(short) == 1
    assert len(long) == 1
    assert short != long
    assert 5 <= _ttl_left(gateway, short.pop()) <= 10
    assert 35 <= _ttl_left(gateway, long.pop()) <= 40


# -- a won instant's task locks, together, on a batch lease ------------------------------------


def test_task_locks_taken_together_share_a_lease_and_are_released_one_by_one(
    lock: EtcdLock, etcd_url: str, gateway: httpx.Client
) -> None:
    """`acquire_many` (the resident host's task locks of the fires it won): the held
    name is lost and keeps its holder; the won keys share ONE lease and carry their
    own owner tokens; the fencing token is each key's create_revision; releasing one
    deletes that key alone."""
    names = _names("tasks", 6)
    other = EtcdLock(etcd_url)
    try:
        assert other.try_acquire(names[2], 30)
        held_before = _stored(gateway, names[2])
        revision_before = _revision(gateway)
        answers = lock.acquire_many([(name, 30) for name in names], fenced=True)
        assert answers[2] is None
        assert _stored(gateway, names[2]) == held_before, "a lost acquisition changed the key"
        won = [answer for answer in answers if isinstance(answer, Holding)]
        assert len(won) == 5, answers
        stored = {holding.name: _stored(gateway, holding.name) for holding in won}
        for holding in won:
            entry = stored[holding.name]
            assert entry is not None
            assert base64.b64decode(entry["value"]).decode() == holding.owner
            assert holding.fence == int(entry["create_revision"]) > revision_before
        leases = {entry["lease"] for entry in stored.values() if entry is not None}
        assert len(leases) == 1, leases
        assert 25 <= _ttl_left(gateway, leases.pop()) <= 30

        lock.release_holding(won[0])
        assert _stored(gateway, won[0].name) is None
        assert all(_stored(gateway, holding.name) is not None for holding in won[1:])
        for holding in won[1:]:
            lock.release_holding(holding)
        assert all(_stored(gateway, holding.name) is None for holding in won)
        assert len(lock._batch_holdings) == 0
        other.release(names[2])
    finally:
        other.close()


def test_renewing_a_batch_holding_moves_it_to_its_own_lease_and_keeps_its_token(
    lock: EtcdLock, gateway: httpx.Client
) -> None:
    """A keep-alive of the batch lease would extend the holdings nobody renews: the
    renewed one moves to a lease of its own (fresh TTL), its fencing token unchanged,
    and the batch lease is left running down for the others."""
    names = _names("renew", 3)
    first, second, third = lock.acquire_many([(name, 10) for name in names], fenced=True)
    assert isinstance(first, Holding)
    assert isinstance(second, Holding)
    assert isinstance(third, Holding)
    entry = _stored(gateway, first.name)
    assert entry is not None
    batch_lease = entry["lease"]
    time.sleep(2.2)
    assert lock.renew_holding(first, 10) is True
    moved = _stored(gateway, first.name)
    assert moved is not None
    assert int(moved["lease"]) == lease_id(first.owner) != int(batch_lease)
    assert int(moved["create_revision"]) == first.fence
    assert _ttl_left(gateway, moved["lease"]) >= 9
    assert _ttl_left(gateway, batch_lease) <= 8, "the renewal kept the batch lease alive"
    assert lock.renew_holding(first, 10) is True  # now an ordinary keep-alive
    lock.release_holding(first)
    assert _stored(gateway, first.name) is None
    assert _stored(gateway, second.name) is not None
    for holding in (second, third):
        lock.release_holding(holding)


def test_a_batch_holding_whose_key_was_taken_over_never_deletes_the_new_holders_key(
    lock: EtcdLock, etcd_url: str, gateway: httpx.Client
) -> None:
    """The key deleted by hand, then taken by another lock: the old holding's renewal
    is refused (lost), and its release deletes nothing: the checks are on the owner."""
    names = _names("taken", 2)
    first, second = lock.acquire_many([(name, 30) for name in names])
    assert isinstance(first, Holding)
    assert isinstance(second, Holding)
    gateway.post(
        "/v3/kv/deleterange", json={"key": base64.b64encode(lock_key(first.name)).decode()}
    )
    other = EtcdLock(etcd_url)
    try:
        assert other.try_acquire(first.name, 30)
        taken = _stored(gateway, first.name)
        assert lock.renew_holding(first, 30) is False
        assert lock.is_lost(first.name)
        lock.release_holding(first)
        gateway.post(
            "/v3/kv/deleterange", json={"key": base64.b64encode(lock_key(second.name)).decode()}
        )
        assert other.try_acquire(second.name, 30)
        lock.release_holding(second)  # its owner-checked delete finds another owner
        assert _stored(gateway, first.name) == taken
        assert _stored(gateway, second.name) is not None
        other.release(first.name)
        other.release(second.name)
    finally:
        other.close()


def test_releases_waiting_for_one_another_are_one_transaction_each_answered(
    lock: EtcdLock, etcd_url: str, gateway: httpx.Client
) -> None:
    names = _names("group", 12)
    holdings = lock.acquire_many([(name, 30) for name in names], fenced=True)
    won = [holding for holding in holdings if isinstance(holding, Holding)]
    assert len(won) == 12, holdings
    # The first key is deleted by hand and taken by another lock: its release must be
    # answered lost, and must not delete the other lock's key.
    gateway.post("/v3/kv/deleterange", json={"key": base64.b64encode(lock_key(names[0])).decode()})
    other = EtcdLock(etcd_url)
    try:
        assert other.try_acquire(names[0], 30)
        taken = _stored(gateway, names[0])
        releases = lock._shared_releases
        revisions: list[int] = []
        send_as_one_group(
            releases,
            [partial(lock.release_holding, holding) for holding in won],
            before_sending=lambda: revisions.append(_revision(gateway)),
        )
        [revision] = revisions
        assert _revision(gateway) == revision + 1, "the group was not one transaction"
        assert won[0].lost
        assert not any(holding.lost for holding in won[1:])
        assert all(_stored(gateway, holding.name) is None for holding in won[1:])
        assert _stored(gateway, names[0]) == taken, "the new holder's key was touched"
        assert len(lock._batch_holdings) == 0
        other.release(names[0])
    finally:
        other.close()
