"""The etcd protocol of many names at once without a server: the fire claims of an
instant, and a won instant's task locks, on one batch lease.

The replies are etcd 3.4's JSON gateway's (`etcd_support`); the integration suite runs
the same operations against a member.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from firefly_scheduling_etcd import batch_leases, protocol
from firefly_scheduling_etcd.messages import Call, EtcdServerError, Reply

sys.path.insert(0, str(Path(__file__).resolve().parent / "etcd_support"))
from firefly_etcd_replies import b64, body, drive, ok

# -- fire claims of an instant together ---------------------------------------------------


def _ranges(*counts: int) -> Reply:
    return ok({"responses": [{"response_range": {"count": str(c)} if c else {}} for c in counts]})


def _creates(*won: bool) -> Reply:
    return ok({"responses": [{"response_txn": {"succeeded": True} if w else {}} for w in won]})


def test_claims_of_held_names_cost_one_read_and_nothing_else() -> None:
    won, calls = drive(batch_leases.claim_many([("a", 30), ("b", 30)], "token"), _ranges(1, 1))
    assert won == [False, False]
    assert [call.path for call in calls] == ["/v3/kv/txn"]
    assert all("request_range" in op for op in body(calls[0])["success"])


def test_free_names_share_a_lease_and_a_race_lost_since_the_read_is_lost_alone() -> None:
    operation = batch_leases.claim_many([("a", 30), ("b", 30), ("c", 30)], "token")
    granted = ok({"ID": "1", "TTL": "30"})
    won, calls = drive(operation, _ranges(0, 1, 0), granted, _creates(True, False))
    assert won == [True, False, False]
    assert [call.path for call in calls] == ["/v3/kv/txn", "/v3/lease/grant", "/v3/kv/txn"]
    lease = body(calls[1])["ID"]
    nested = [op["request_txn"] for op in body(calls[2])["success"]]
    assert [txn["success"][0]["request_put"]["key"] for txn in nested] == [
        b64("firefly/scheduling/lock/a"),
        b64("firefly/scheduling/lock/c"),
    ]
    assert {txn["success"][0]["request_put"]["lease"] for txn in nested} == {lease}
    assert all(txn["compare"][0]["create_revision"] == "0" for txn in nested)


def test_a_lease_whose_every_create_lost_is_revoked() -> None:
    operation = batch_leases.claim_many([("a", 30)], "token")
    won, calls = drive(operation, _ranges(0), ok({"ID": "1", "TTL": "30"}), _creates(False), ok({}))
    assert won == [False]
    assert calls[-1].path == "/v3/lease/revoke"
    assert body(calls[-1])["ID"] == body(calls[1])["ID"]


def test_a_failed_create_revokes_the_batch_lease_and_raises() -> None:
    operation = batch_leases.claim_many([("a", 30), ("b", 30)], "token")
    lost = ConnectionError("reply lost")
    with pytest.raises(ConnectionError, match="reply lost"):
        drive(operation, _ranges(0, 0), ok({"ID": "1", "TTL": "30"}), lost, ok({}))


def test_a_transaction_answered_with_the_wrong_number_of_responses_is_an_error() -> None:
    with pytest.raises(EtcdServerError, match="1 responses to a transaction of 2"):
        drive(batch_leases.claim_many([("a", 30), ("b", 30)], "token"), _ranges(0))


def test_names_beyond_one_transaction_go_in_the_next() -> None:
    claims = [(f"n{index:03d}", 30) for index in range(batch_leases.NAMES_PER_TXN + 1)]
    token = _token_starting_at(claims, 0)
    held = [1] * batch_leases.NAMES_PER_TXN
    won, calls = drive(batch_leases.claim_many(claims, token), _ranges(*held), _ranges(1))
    assert won == [False] * len(claims)
    assert [len(body(call)["success"]) for call in calls] == [batch_leases.NAMES_PER_TXN, 1]


def test_each_chunk_is_read_then_created_from_a_chunk_the_token_picks() -> None:
    """Chunks of 64 in the order of the encoded keys, each read and its free names
    created before the next is read; the lease granted once, before the first create.
    Two nodes starting on different chunks each find the other's chunk held and send
    it no create."""
    claims = [(f"n{index:03d}", 30) for index in range(batch_leases.NAMES_PER_TXN + 1)]
    token = _token_starting_at(claims, 1)
    [alone] = _key_ordered(claims)[batch_leases.NAMES_PER_TXN :]
    free_first = _ranges(0)
    granted = ok({"ID": "1", "TTL": "30"})
    rest_held = _ranges(*[1] * batch_leases.NAMES_PER_TXN)
    won, calls = drive(
        batch_leases.claim_many(claims, token), free_first, granted, _creates(True), rest_held
    )
    paths = ["/v3/kv/txn", "/v3/lease/grant", "/v3/kv/txn", "/v3/kv/txn"]
    assert [call.path for call in calls] == paths
    read_keys = [op["request_range"]["key"] for op in body(calls[0])["success"]]
    assert read_keys == [b64(f"firefly/scheduling/lock/{claims[alone][0]}")]
    assert won == [index == alone for index in range(len(claims))]


def _key_ordered(claims: list[tuple[str, int]]) -> list[int]:
    return sorted(
        range(len(claims)), key=lambda index: b64(f"firefly/scheduling/lock/{claims[index][0]}")
    )


def _token_starting_at(claims: list[tuple[str, int]], chunk: int) -> str:
    """A batch token whose rotation starts `claim_many` at `chunk`."""
    size = batch_leases.NAMES_PER_TXN
    wanted = _key_ordered(claims)[chunk * size : (chunk + 1) * size]
    keys = [b64(f"firefly/scheduling/lock/{name}") for name, _ in claims]
    for attempt in range(1000):
        token = f"token-{attempt}"
        if batch_leases._rotated_chunks(keys, range(len(claims)), token)[0] == wanted:
            return token
    raise AssertionError("no token starts at that chunk")


# -- a won instant's task locks together ---------------------------------------------------


def test_acquisitions_of_held_names_cost_a_grant_a_failed_create_and_a_revoke() -> None:
    requests = [("a", "owner-a", 30.0), ("b", "owner-b", 30.0)]
    granted = ok({"ID": "1", "TTL": "30"})
    tokens, calls = drive(
        batch_leases.acquire_many(requests, "batch"), granted, _creates(False, False), ok({})
    )
    assert tokens == [None, None]
    assert [call.path for call in calls] == ["/v3/lease/grant", "/v3/kv/txn", "/v3/lease/revoke"]
    assert body(calls[2])["ID"] == body(calls[0])["ID"]


def test_names_share_a_lease_per_ttl_and_each_key_carries_its_owner_with_no_read_first() -> None:
    requests = [("a", "owner-a", 30.0), ("b", "owner-b", 30.0), ("c", "owner-c", 29.5)]
    granted = ok({"ID": "1", "TTL": "30"})
    tokens, calls = drive(
        batch_leases.acquire_many(requests, "batch"), granted, _creates(True, False, True)
    )
    # Both created in one transaction: its revision (41) is each key's create_revision.
    assert tokens == [41, None, 41]
    assert [call.path for call in calls] == ["/v3/lease/grant", "/v3/kv/txn"]
    lease = str(protocol.lease_id("batch/30"))
    assert body(calls[0]) == {"ID": lease, "TTL": "30"}
    puts = [op["request_txn"]["success"][0]["request_put"] for op in body(calls[1])["success"]]
    assert puts == [
        {"key": b64(f"firefly/scheduling/lock/{name}"), "value": b64(owner), "lease": lease}
        for name, owner, _ in requests
    ]
    nested = [op["request_txn"] for op in body(calls[1])["success"]]
    assert all(txn["compare"][0]["create_revision"] == "0" for txn in nested)


def test_a_failure_after_the_grant_revokes_the_batch_lease_and_raises() -> None:
    requests = [("a", "owner-a", 30.0), ("b", "owner-b", 10.0)]
    granted = ok({"ID": "1", "TTL": "30"})
    lost = ConnectionError("reply lost")
    sent: list[Call] = []
    with pytest.raises(ConnectionError, match="reply lost"):
        drive(
            batch_leases.acquire_many(requests, "batch"),
            *(granted, granted, lost, ok({}), ok({})),
            calls=sent,
        )
    assert [call.path for call in sent[-2:]] == ["/v3/lease/revoke"] * 2
    assert {body(call)["ID"] for call in sent[-2:]} == {
        str(protocol.lease_id("batch/30")),
        str(protocol.lease_id("batch/10")),
    }


def test_a_write_answered_without_a_revision_is_an_error_not_a_token() -> None:
    bare = Reply(200, json.dumps({"responses": [{"response_txn": {"succeeded": True}}]}).encode())
    operation = batch_leases.acquire_many([("a", "owner-a", 30.0)], "batch")
    with pytest.raises(EtcdServerError, match="without a revision"):
        drive(operation, ok({"ID": "1", "TTL": "30"}), bare, ok({}))


def test_a_batch_holding_is_released_by_an_owner_checked_delete() -> None:
    released, calls = drive(batch_leases.release_shared("a", "owner-a"), ok({"succeeded": True}))
    assert released is True
    [call] = calls
    assert call.path == "/v3/kv/txn"
    key = b64("firefly/scheduling/lock/a")
    assert body(call) == {
        "compare": [{"key": key, "target": "VALUE", "result": "EQUAL", "value": b64("owner-a")}],
        "success": [{"request_delete_range": {"key": key}}],
    }
    gone, _ = drive(batch_leases.release_shared("a", "owner-a"), ok({"succeeded": False}))
    assert gone is False


def test_batch_holdings_released_together_are_one_transaction_each_answered() -> None:
    held = [("a", "owner-a"), ("b", "owner-b"), ("c", "owner-c")]
    released, calls = drive(batch_leases.release_shared_many(held), _creates(True, False, True))
    assert released == [True, False, True]
    [call] = calls
    assert call.path == "/v3/kv/txn"
    nested = [op["request_txn"] for op in body(call)["success"]]
    assert nested == [
        {
            "compare": [
                {
                    "key": b64(f"firefly/scheduling/lock/{name}"),
                    "target": "VALUE",
                    "result": "EQUAL",
                    "value": b64(owner),
                }
            ],
            "success": [{"request_delete_range": {"key": b64(f"firefly/scheduling/lock/{name}")}}],
        }
        for name, owner in held
    ]
    assert "compare" not in body(call), "the group itself has no condition"


def test_releases_beyond_one_transaction_or_of_one_name_twice_go_in_the_next() -> None:
    held = [(f"n{index}", f"owner-{index}") for index in range(batch_leases.NAMES_PER_TXN + 1)]
    held.append(("n0", "owner-again"))  # a second holding of a name: etcd refuses a key twice
    first = _creates(*[True] * batch_leases.NAMES_PER_TXN)
    released, calls = drive(batch_leases.release_shared_many(held), first, _creates(True, False))
    assert released == [True] * (batch_leases.NAMES_PER_TXN + 1) + [False]
    assert [len(body(call)["success"]) for call in calls] == [batch_leases.NAMES_PER_TXN, 2]
    duplicated = [("x", "owner-1"), ("x", "owner-2")]
    released, calls = drive(
        batch_leases.release_shared_many(duplicated), _creates(False), _creates(True)
    )
    assert released == [False, True]
    assert len(calls) == 2


def test_a_group_of_releases_answered_with_the_wrong_number_of_responses_is_an_error() -> None:
    with pytest.raises(EtcdServerError, match="1 responses to a transaction of 2"):
        drive(batch_leases.release_shared_many([("a", "o-a"), ("b", "o-b")]), _creates(True))


def test_a_batch_holdings_first_renewal_moves_its_key_to_its_own_lease() -> None:
    moved, calls = drive(
        batch_leases.renew_shared("a", "owner-a", 30),
        ok({"ID": "1", "TTL": "30"}),
        ok({"succeeded": True}),
    )
    assert moved is True
    own = str(protocol.lease_id("owner-a"))
    assert [call.path for call in calls] == ["/v3/lease/grant", "/v3/kv/txn"]
    assert body(calls[0]) == {"ID": own, "TTL": "30"}
    move = body(calls[1])
    assert move["compare"][0]["value"] == b64("owner-a")
    assert move["success"][0]["request_put"]["lease"] == own


@pytest.mark.parametrize("answer", [ok({"succeeded": False}), ConnectionError("reply lost")])
def test_a_move_that_fails_revokes_the_new_lease(answer: Reply | Exception) -> None:
    sent: list[Call] = []
    try:
        moved, _ = drive(
            batch_leases.renew_shared("a", "owner-a", 30),
            *(ok({"ID": "1", "TTL": "30"}), answer, ok({})),
            calls=sent,
        )
    except ConnectionError:
        assert isinstance(answer, ConnectionError)
    else:
        assert moved is False
    assert sent[-1].path == "/v3/lease/revoke"
    assert body(sent[-1]) == {"ID": str(protocol.lease_id("owner-a"))}
