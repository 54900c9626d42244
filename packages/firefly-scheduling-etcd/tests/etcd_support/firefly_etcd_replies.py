"""etcd's JSON gateway replies, and a driver that feeds them to a sans-IO operation.

The replies are what etcd 3.4's JSON gateway sends (copied from a real member, except
the stream-error shape, which is grpc-gateway's for a failed stream). The etcd
protocol tests (`test_etcd_protocol`, `test_etcd_batch_protocol`) put this directory
on sys.path.
"""

from __future__ import annotations

import base64
import json
from typing import Any, TypeVar

from firefly_scheduling_etcd.messages import Call, Reply
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
