"""The etcd protocol without a server: keys, lease IDs, TTLs, and how answers are read.

The replies below are what etcd 3.4's JSON gateway sends (copied from a real member,
except the stream-error shape, which is grpc-gateway's for a failed stream); the
integration suite runs the same operations against a member.
"""

from __future__ import annotations

import base64
import json
from typing import Any, TypeVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling.locks.base import new_owner_token
from firefly_scheduling_etcd import batch_leases, messages, protocol
from firefly_scheduling_etcd.messages import Call, EtcdServerError, Reply
from firefly_scheduling_etcd.protocol import Operation

T = TypeVar("T")
HEADER = {"cluster_id": "2037210783374497686", "member_id": "13195394291058371180"}


def ok(document: dict[str, Any]) -> Reply:
    return Reply(200, json.dumps({"header": {**HEADER, "revision": "41"}, **document}).encode())


NOT_FOUND = Reply(
    404,
    b'{"error":"etcdserver: requested lease not found",'
    b'"message":"etcdserver: requested lease not found","code":5}',
)


def drive(
    operation: Operation[T], *replies: Reply | Exception, calls: list[Call] | None = None
) -> tuple[T, list[Call]]:
    """Run `operation`, answering its calls in order; return its result and the calls
    (also appended to `calls`, which an operation that raises leaves readable)."""
    calls = [] if calls is None else calls
    pending = list(replies)
    try:
        call = next(operation)
        while True:
            calls.append(call)
            answer = pending.pop(0)
            call = (
                operation.throw(answer) if isinstance(answer, Exception) else operation.send(answer)
            )
    except StopIteration as finished:
        assert pending == [], "the operation stopped before using every reply"
        result: T = finished.value
        return result, calls


def body(call: Call) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(call.body)
    return document


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# -- keys, lease IDs, TTLs ---------------------------------------------------------------


def test_keys_carry_the_prefix_and_the_name_as_utf8() -> None:
    assert protocol.lock_key("report") == b"firefly/scheduling/lock/report"
    assert protocol.lock_key("a/b 日本") == "firefly/scheduling/lock/a/b 日本".encode()


def test_a_name_that_is_not_valid_text_is_refused() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        protocol.lock_key("lone \ud800 surrogate")


@given(st.text(st.characters(codec="utf-8"), min_size=1, max_size=64))
def test_a_lease_id_is_a_positive_63_bit_function_of_the_owner(owner: str) -> None:
    lease = protocol.lease_id(owner)
    assert 0 < lease < 2**63
    assert protocol.lease_id(owner) == lease


def test_owner_tokens_get_distinct_leases() -> None:
    leases = {protocol.lease_id(new_owner_token()) for _ in range(10_000)}
    assert len(leases) == 10_000


@pytest.mark.parametrize(
    ("ttl", "seconds"), [(0.001, 1), (1.0, 1), (1.2, 2), (30.0, 30), (59.999, 60)]
)
def test_lease_ttls_are_whole_seconds_rounded_up(ttl: float, seconds: int) -> None:
    assert protocol.lease_seconds(ttl) == seconds


# -- acquire -----------------------------------------------------------------------------------


def test_a_held_name_is_lost_in_one_read_and_nothing_is_written() -> None:
    result, calls = drive(protocol.acquire("job", "owner-1", 30), ok({"count": "1"}))
    assert result is None
    assert [c.path for c in calls] == ["/v3/kv/range"]
    assert body(calls[0]) == {"key": b64("firefly/scheduling/lock/job"), "count_only": True}


def test_a_free_name_is_leased_created_and_fenced_by_the_create_revision() -> None:
    lease = str(protocol.lease_id("owner-1"))
    result, calls = drive(
        protocol.acquire("job", "owner-1", 2.5),
        ok({}),  # count 0 is omitted from the JSON
        ok({"ID": lease, "TTL": "3"}),
        ok({"succeeded": True, "responses": [{"response_put": {}}]}),
    )
    assert result == 41
    assert [c.path for c in calls] == ["/v3/kv/range", "/v3/lease/grant", "/v3/kv/txn"]
    assert body(calls[1]) == {"ID": lease, "TTL": "3"}
    key = b64("firefly/scheduling/lock/job")
    assert body(calls[2]) == {
        "compare": [{"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
        "success": [{"request_put": {"key": key, "value": b64("owner-1"), "lease": lease}}],
    }


def test_a_woken_waiter_skips_the_read_and_a_held_key_still_loses() -> None:
    """After its key's deletion a waiter grants and creates at once; the create's own
    comparison refuses a key someone else created first, and the lease is revoked."""
    result, calls = drive(
        protocol.acquire("job", "owner-1", 30, read_first=False),
        ok({"ID": "1", "TTL": "30"}),
        ok({"succeeded": False}),
        ok({}),
    )
    assert result is None
    assert [c.path for c in calls] == ["/v3/lease/grant", "/v3/kv/txn", "/v3/lease/revoke"]


def test_a_race_lost_after_the_read_revokes_the_unused_lease() -> None:
    lease = str(protocol.lease_id("owner-1"))
    result, calls = drive(
        protocol.acquire("job", "owner-1", 30),
        ok({}),
        ok({"ID": lease, "TTL": "30"}),
        ok({}),  # succeeded: false is omitted
        ok({}),
    )
    assert result is None
    assert [c.path for c in calls][-1] == "/v3/lease/revoke"
    assert body(calls[-1]) == {"ID": lease}


def test_a_create_whose_reply_is_lost_revokes_the_lease_and_reraises() -> None:
    lost = TimeoutError("read timed out")
    with pytest.raises(TimeoutError, match="read timed out"):
        drive(
            protocol.acquire("job", "owner-1", 30),
            ok({}),
            ok({"ID": "1", "TTL": "30"}),
            lost,
            OSError("connection refused"),  # the revoke fails too: its error is swallowed
        )


def test_a_failed_grant_raises_the_servers_message() -> None:
    clash = Reply(
        400,
        b'{"error":"etcdserver: lease already exists",'
        b'"message":"etcdserver: lease already exists","code":9}',
    )
    with pytest.raises(EtcdServerError, match="lease already exists") as caught:
        drive(protocol.acquire("job", "owner-1", 30), ok({}), clash)
    assert (caught.value.code, caught.value.status) == (9, 400)
    assert messages.hint(caught.value) == (
        "an acquisition's lease ID clashed with a live lease; retry"
    )


# -- release and renew ---------------------------------------------------------------------------


def test_release_revokes_the_holdings_lease_in_one_call() -> None:
    result, calls = drive(protocol.release("owner-1"), ok({}))
    assert result is True
    assert [(c.path, body(c)) for c in calls] == [
        ("/v3/lease/revoke", {"ID": str(protocol.lease_id("owner-1"))})
    ]


def test_release_of_a_lapsed_lease_reports_it_gone() -> None:
    assert drive(protocol.release("owner-1"), NOT_FOUND)[0] is False


def test_renew_keeps_the_lease_alive_and_checks_the_key_still_carries_it() -> None:
    lease = str(protocol.lease_id("owner-1"))
    result, calls = drive(
        protocol.renew("job", "owner-1", 30),
        ok({"result": {"header": HEADER, "ID": lease, "TTL": "30"}}),
        ok({"succeeded": True}),
    )
    assert result is True
    assert [c.path for c in calls] == ["/v3/lease/keepalive", "/v3/kv/txn"]
    key = b64("firefly/scheduling/lock/job")
    assert body(calls[1]) == {
        "compare": [{"key": key, "target": "LEASE", "result": "EQUAL", "lease": lease}]
    }


def test_renew_of_a_lapsed_lease_is_false_in_one_call() -> None:
    # A keep-alive of an unknown lease answers 200 without a TTL.
    result, calls = drive(
        protocol.renew("job", "owner-1", 30), ok({"result": {"header": HEADER, "ID": "1"}})
    )
    assert result is False
    assert len(calls) == 1


def test_renew_of_a_key_deleted_by_hand_is_false() -> None:
    result, _ = drive(
        protocol.renew("job", "owner-1", 30),
        ok({"result": {"ID": "1", "TTL": "30"}}),
        ok({}),
    )
    assert result is False


def test_renew_longer_than_the_granted_ttl_is_refused() -> None:
    with pytest.raises(ValueError, match=r"granted with \(30 s\), not to 60"):
        drive(protocol.renew("job", "owner-1", 60), ok({"result": {"ID": "1", "TTL": "30"}}))


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "message", "advice"),
    [
        (
            Reply(
                503,
                b'{"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14}',
            ),
            "etcdserver: no leader",
            "the cluster has no leader",
        ),
        (
            Reply(
                500,
                b'{"error":"etcdserver: mvcc: database space exceeded",'
                b'"message":"etcdserver: mvcc: database space exceeded","code":8}',
            ),
            "database space exceeded",
            "NOSPACE alarm",
        ),
        (
            Reply(
                200,
                b'{"error":{"grpc_code":14,"http_code":503,'
                b'"message":"etcdserver: request timed out","http_status":"Service Unavailable"}}',
            ),
            "request timed out",
            "did not commit in time",
        ),
        (Reply(404, b"404 page not found\n"), "HTTP 404: '404 page not found'", "no etcd v3"),
        (Reply(502, b"<html>" + b"x" * 1000), "HTTP 502", None),
    ],
)
def test_error_answers_raise_with_the_servers_message_and_a_hint(
    reply: Reply, message: str, advice: str | None
) -> None:
    with pytest.raises(EtcdServerError, match=message) as caught:
        drive(protocol.release("owner-1"), reply)
    assert len(str(caught.value)) < 300
    shown = messages.hint(caught.value)
    assert shown is None if advice is None else advice in (shown or "")


def test_other_errors_get_no_hint() -> None:
    assert messages.hint(OSError("connection refused")) is None


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


# -- waiting: the watch of deletions ---------------------------------------------------


def test_the_release_watch_covers_every_lock_key_and_filters_out_puts() -> None:
    watch = protocol.watch_releases()
    request = json.loads(watch.body)["create_request"]
    assert watch.path == "/v3/watch"
    assert base64.b64decode(request["key"]) == b"firefly/scheduling/lock/"
    assert base64.b64decode(request["range_end"]) == b"firefly/scheduling/lock0"
    assert request["filters"] == ["NOPUT"]


def _watch_line(result: dict[str, Any]) -> bytes:
    return json.dumps({"result": {"header": {"revision": "7"}, **result}}).encode()


def test_a_watch_line_reports_its_creation_and_only_deleted_keys() -> None:
    assert protocol.deleted_keys(_watch_line({"created": True})) == (True, [])
    deleted = protocol.lock_key("report")
    events = [
        {"type": "DELETE", "kv": {"key": base64.b64encode(deleted).decode()}},
        {"kv": {"key": base64.b64encode(b"firefly/scheduling/lock/other").decode()}},  # a put
    ]
    assert protocol.deleted_keys(_watch_line({"events": events})) == (False, [deleted])


@pytest.mark.parametrize(
    "line",
    [
        _watch_line({"canceled": True, "cancel_reason": "mvcc: required revision compacted"}),
        json.dumps({"error": {"grpc_code": 14, "message": "etcdserver: no leader"}}).encode(),
        b"[1]",
    ],
)
def test_a_cancelled_or_failed_watch_raises(line: bytes) -> None:
    with pytest.raises(EtcdServerError):
        protocol.deleted_keys(line)
