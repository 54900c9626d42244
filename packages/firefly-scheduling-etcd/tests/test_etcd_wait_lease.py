"""A waiter's lease granted before its wait: an attempt refreshes it or not, none revokes it.

Without a server: the replies are the shapes etcd 3.4's JSON gateway sends (the
integration suite runs the same waits against a member).
"""

from __future__ import annotations

import json
from typing import Any

from firefly_scheduling_etcd import protocol
from firefly_scheduling_etcd.messages import Reply

LEASE = str(protocol.lease_id("owner-1"))


def ok(document: dict[str, Any]) -> Reply:
    return Reply(200, json.dumps({"header": {"revision": "57"}, **document}).encode())


def paths(
    operation: protocol.Operation[int | None], *replies: Reply
) -> tuple[int | None, list[str]]:
    """Run `operation` on `replies`, in order; its result and the paths it called."""
    sent, pending = [], list(replies)
    try:
        call = next(operation)
        while True:
            sent.append(call.path)
            call = operation.send(pending.pop(0))
    except StopIteration as finished:
        assert pending == [], "the operation stopped before using every reply"
        return finished.value, sent


def test_a_granted_lease_is_only_refreshed_before_the_create() -> None:
    """A woken waiter whose lease is no longer fresh sends a keep-alive (no Raft write)
    and the create."""
    token, sent = paths(
        protocol.acquire("job", "owner-1", 30, read_first=False, granted=True),
        ok({"result": {"ID": LEASE, "TTL": "30"}}),
        ok({"succeeded": True}),
    )
    assert token == 57
    assert sent == ["/v3/lease/keepalive", "/v3/kv/txn"]


def test_a_fresh_granted_lease_costs_the_create_alone() -> None:
    token, sent = paths(
        protocol.acquire("job", "owner-1", 30, read_first=False, granted=True, refresh=False),
        ok({"succeeded": True}),
    )
    assert token == 57
    assert sent == ["/v3/kv/txn"]


def test_a_granted_lease_that_lapsed_during_the_wait_is_granted_again() -> None:
    token, sent = paths(
        protocol.acquire("job", "owner-1", 30, read_first=False, granted=True),
        ok({"result": {"ID": LEASE}}),  # TTL 0 is omitted: the lease is gone
        ok({"ID": LEASE, "TTL": "30"}),
        ok({"succeeded": True}),
    )
    assert token == 57
    assert sent == ["/v3/lease/keepalive", "/v3/lease/grant", "/v3/kv/txn"]


def test_a_lost_create_keeps_a_granted_lease_for_the_next_attempt() -> None:
    token, sent = paths(
        protocol.acquire("job", "owner-1", 30, read_first=False, granted=True),
        ok({"result": {"ID": LEASE, "TTL": "30"}}),
        ok({"succeeded": False}),
    )
    assert token is None
    assert sent == ["/v3/lease/keepalive", "/v3/kv/txn"]  # no revoke


def test_a_granted_waiter_that_finds_the_name_held_sends_only_the_read() -> None:
    token, sent = paths(protocol.acquire("job", "owner-1", 30, granted=True), ok({"count": "1"}))
    assert token is None
    assert sent == ["/v3/kv/range"]
