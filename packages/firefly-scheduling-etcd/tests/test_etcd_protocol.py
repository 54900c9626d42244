"""The etcd protocol of one lock without a server: keys, lease IDs, TTLs, acquire,
release, renew, errors, and the watch of releases.

The replies are etcd 3.4's JSON gateway's (`etcd_support`); the integration suite runs
the same operations against a member.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from firefly_scheduling.locks.base import new_owner_token
from firefly_scheduling_etcd import messages, protocol
from firefly_scheduling_etcd.messages import EtcdServerError, Reply

sys.path.insert(0, str(Path(__file__).resolve().parent / "etcd_support"))
from firefly_etcd_replies import HEADER, NOT_FOUND, b64, body, drive, ok

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
