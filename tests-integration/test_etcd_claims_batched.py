"""etcd takes the fire claims of an instant together, read from the server by a second client.

`EtcdLock.try_claim_many` reads every name in one read-only transaction, grants one
lease per distinct TTL, and creates each free key in a nested create-if-absent
transaction of one transaction, at most 64 per transaction (`protocol.claim_many`).
A second client (the gateway, over plain HTTP) checks:

* 200 fresh claims are all won, every key attached to ONE lease whose TTL covers
  the claim, created by four transactions (64 + 64 + 64 + 8);
* names another node holds are lost, and keep that node's value and lease; the
  free ones of the same batch are won;
* a batch that loses every name writes nothing: the store's revision is unchanged;
* two TTLs in one batch get a lease each;
* the task locks of a won instant, taken together (`acquire_many`), each get the
  lease of their own holding, so they are released and renewed one by one.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_etcd import EtcdLock
from firefly_scheduling_etcd.endpoint import parse_endpoint
from firefly_scheduling_etcd.protocol import lease_id, lock_key


@pytest.fixture
def gateway(etcd_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=parse_endpoint(etcd_url).base_url, timeout=10) as client:
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


# -- a won instant's task locks, together, each on a lease of its own ------------------------


def test_task_locks_taken_together_each_get_their_own_lease_and_one_revision(
    lock: EtcdLock, etcd_url: str, gateway: httpx.Client
) -> None:
    """`acquire_many` (the resident host's task locks of the fires it won): the held
    name is lost and keeps its holder; each won key carries its own holding's lease
    (derived from its owner token), so releasing one deletes that key alone, and
    renewing another keeps it; the fencing token is the key's create_revision."""
    names = _names("tasks", 6)
    other = EtcdLock(etcd_url)
    try:
        assert other.try_acquire(names[2], 30)
        held_before = _stored(gateway, names[2])
        revision_before = _revision(gateway)
        answers = lock.acquire_many([(name, 30) for name in names], fenced=True)
        assert answers[2] is None
        assert _stored(gateway, names[2]) == held_before, "a lost acquisition changed the key"
        holdings = [answer for index, answer in enumerate(answers) if index != 2]
        assert all(isinstance(holding, Holding) for holding in holdings), answers
        won = [holding for holding in holdings if isinstance(holding, Holding)]
        stored = {holding.name: _stored(gateway, holding.name) for holding in won}
        for holding in won:
            entry = stored[holding.name]
            assert entry is not None
            assert base64.b64decode(entry["value"]).decode() == holding.owner
            assert int(entry["lease"]) == lease_id(holding.owner)
            assert holding.fence == int(entry["create_revision"]) > revision_before
            assert 25 <= _ttl_left(gateway, entry["lease"]) <= 30
        assert len({entry["lease"] for entry in stored.values() if entry is not None}) == 5

        lock.release_holding(won[0])
        assert _stored(gateway, won[0].name) is None
        assert all(_stored(gateway, holding.name) is not None for holding in won[1:])
        assert lock.renew_holding(won[1], 30) is True
        for holding in won[1:]:
            lock.release_holding(holding)
        assert all(_stored(gateway, holding.name) is None for holding in won)
        other.release(names[2])
    finally:
        other.close()
