"""An etcd waiter's lease, granted before its wait: honest once won, revoked if not.

A waiter grants its lease after its first lost attempt, so that after a release it
only creates its key (refreshing the lease first once a tenth of its TTL has run).
These check, on a real member, what the contract suite cannot see from the lock's
port: the server's own view of that lease.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_etcd import EtcdLock
from firefly_scheduling_etcd.protocol import lease_id
from firefly_scheduling_etcd.url import parse_url


@pytest.fixture
def gateway(etcd_url: str) -> Iterator[httpx.Client]:
    """A plain client of the member's JSON gateway, to read leases as an operator would."""
    with httpx.Client(base_url=parse_url(etcd_url).base_url, trust_env=False) as client:
        yield client


def seconds_left(gateway: httpx.Client, owner: str) -> int:
    """The seconds left of `owner`'s lease on the server, rounded down; -1 once it is gone."""
    reply = gateway.post("/v3/lease/timetolive", json={"ID": str(lease_id(owner))})
    reply.raise_for_status()
    return int(reply.json().get("TTL", -1))


def prepared_owners(lock: EtcdLock) -> list[str]:
    """Records the owner token of each wait's lease granted ahead (`_prepare_wait`)."""
    owners: list[str] = []
    prepare = lock._prepare_wait

    def recorded(name: str, ttl_seconds: float) -> str | None:
        owner = prepare(name, ttl_seconds)
        if owner is not None:
            owners.append(owner)
        return owner

    lock._prepare_wait = recorded  # type: ignore[method-assign]
    return owners


@pytest.fixture
def locks(etcd_url: str) -> Iterator[tuple[EtcdLock, EtcdLock]]:
    """A holder and a waiter, two instances as on two nodes."""
    holder, waiter = EtcdLock(etcd_url), EtcdLock(etcd_url)
    try:
        yield holder, waiter
    finally:
        waiter.close()
        holder.close()


def test_a_won_waits_lease_runs_at_least_as_long_as_its_holding(
    locks: tuple[EtcdLock, EtcdLock], gateway: httpx.Client
) -> None:
    """The lease was granted when the wait began; the win refreshes it, so the server
    never frees the key before the holding's own deadline."""
    # Released once more than a second of the waiter's lease has run.
    holding = _won_after_a_release(locks, gateway, ttl=3, released_after=1.5)
    assert seconds_left(gateway, holding.owner) == -1


def test_a_win_on_a_fresh_lease_counts_the_ttl_from_the_grant(
    locks: tuple[EtcdLock, EtcdLock], gateway: httpx.Client
) -> None:
    """Within a tenth of its TTL the lease is not refreshed before the create: the
    holding's deadline is then the grant's, not its last attempt's."""
    # Released once more than one of the lease's 30 s has run, fewer than three.
    _won_after_a_release(locks, gateway, ttl=30, released_after=2.0)


def _won_after_a_release(
    locks: tuple[EtcdLock, EtcdLock], gateway: httpx.Client, *, ttl: float, released_after: float
) -> Holding:
    """The waiter's holding, won when the holder released after `released_after`
    seconds, checked against the server's lease, then released."""
    holder, waiter = locks
    name = f"wait-lease-{uuid.uuid4().hex}"
    held = holder.acquire(name, ttl)
    assert held is not None
    owners = prepared_owners(waiter)
    release = threading.Timer(released_after, holder.release_holding, args=(held,))
    release.start()
    holding = waiter.acquire(name, ttl, wait=10)
    release.join()
    assert holding is not None
    assert owners == [holding.owner]
    assert seconds_left(gateway, holding.owner) + 1 > holding.remaining()
    waiter.release_holding(holding)
    return holding


def test_a_wait_that_times_out_revokes_its_lease(
    locks: tuple[EtcdLock, EtcdLock], gateway: httpx.Client
) -> None:
    holder, waiter = locks
    name = f"wait-lease-{uuid.uuid4().hex}"
    assert holder.acquire(name, 30) is not None
    owners = prepared_owners(waiter)
    assert waiter.acquire(name, 30, wait=0.3) is None
    assert len(owners) == 1
    assert seconds_left(gateway, owners[0]) == -1
