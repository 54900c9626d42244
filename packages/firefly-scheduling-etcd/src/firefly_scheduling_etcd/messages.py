"""The etcd v3 JSON gateway's messages: the calls sent, the answers read, the errors.

Nothing here does I/O, and nothing knows about locks: a `Call` is a POST to a path
under `/v3/` with a JSON body (keys and values in base64), a `Reply` is the status
and body the gateway answered, and an error answer becomes an `EtcdServerError`
with etcd's own message, plus `hint`, what an operator should check. The lock
operations (`protocol`, `batch_leases`) are written in these terms.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Final

API_PREFIX: Final = "/v3/"
#: gRPC status codes the gateway reports in error bodies.
NOT_FOUND: Final = 5


@dataclass(frozen=True)
class Call:
    """One POST to the gateway: `path` (under the API prefix) and its JSON `body`."""

    path: str
    body: bytes


@dataclass(frozen=True)
class Reply:
    """What the gateway answered to a `Call`: the HTTP status and the raw body."""

    status: int
    body: bytes


class EtcdServerError(Exception):
    """The gateway answered with an error: etcd's message, gRPC code and HTTP status."""

    def __init__(self, message: str, *, code: int | None, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


def create_if_absent(key: str, value: str, lease: int) -> dict[str, Any]:
    """A transaction creating `key` (base64) with `value` and `lease`, only if it is absent."""
    return {
        "compare": [{"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
        "success": [{"request_put": {"key": key, "value": value, "lease": str(lease)}}],
    }


def delete_if_carries(key: str, owner: str) -> dict[str, Any]:
    """A transaction deleting `key` (base64) only while it carries the value `owner`."""
    return {
        "compare": [carries(key, owner)],
        "success": [{"request_delete_range": {"key": key}}],
    }


def carries(key: str, owner: str) -> dict[str, str]:
    """The comparison "`key` (base64) holds the value `owner`": false for an absent key."""
    return {"key": key, "target": "VALUE", "result": "EQUAL", "value": b64(owner.encode())}


def revision(document: dict[str, Any]) -> int:
    """The store's revision after a write: the fencing token of the keys it created."""
    revision = int(document.get("header", {}).get("revision", 0))
    if revision <= 0:
        raise EtcdServerError(
            f"the gateway answered a write without a revision: {document.get('header')!r}",
            code=None,
            status=200,
        )
    return revision


def responses(document: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """A transaction's responses, one per operation sent, or an `EtcdServerError`."""
    responses = document.get("responses", [])
    if not isinstance(responses, list) or len(responses) != count:
        answered = len(responses) if isinstance(responses, list) else responses
        raise EtcdServerError(
            f"the gateway answered {answered!r} responses to a transaction of {count} operations",
            code=None,
            status=200,
        )
    return responses


def call(path: str, body: dict[str, Any]) -> Call:
    """The `Call` of `path` (under `/v3/`) with `body` as compact JSON."""
    return Call(API_PREFIX + path, json.dumps(body, separators=(",", ":")).encode())


def b64(data: bytes) -> str:
    """`data` as the gateway takes keys and values: base64 text."""
    return base64.b64encode(data).decode("ascii")


def ok(reply: Reply) -> dict[str, Any]:
    """The reply's JSON document, or `EtcdServerError` for any error answer."""
    document = _document(reply)
    error = document.get("error") if document is not None else None
    if document is not None and reply.status == 200 and error is None:
        return document
    raise server_error(reply, document)


def is_not_found(reply: Reply) -> bool:
    """Whether the gateway answered gRPC's NOT_FOUND (a lease already gone, say)."""
    document = _document(reply)
    return reply.status == 404 and document is not None and document.get("code") == NOT_FOUND


def _document(reply: Reply) -> dict[str, Any] | None:
    """The reply's body as a JSON object, or None when it is not one."""
    try:
        document = json.loads(reply.body)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def server_error(reply: Reply, document: dict[str, Any] | None) -> EtcdServerError:
    """The `EtcdServerError` of an error answer, in etcd's words where it gave any."""
    if document is None:  # not the gateway: a proxy, another server, a 404 page
        text = reply.body[:200].decode("utf-8", "replace").strip()
        return EtcdServerError(f"HTTP {reply.status}: {text!r}", code=None, status=reply.status)
    error = document.get("error")
    # Unary calls answer {"error": "...", "code": N}; streams {"error": {"message": ...}}.
    detail = error if isinstance(error, dict) else document
    message = str(detail.get("message") or error or f"HTTP {reply.status}")
    code = detail.get("code", detail.get("grpc_code"))
    return EtcdServerError(
        message, code=code if isinstance(code, int) else None, status=reply.status
    )


#: (fragment of etcd's message, what the operator should do), first match wins.
_HINTS: Final = (
    ("no leader", "the cluster has no leader: check that a majority of its members is up"),
    ("request timed out", "the cluster did not commit in time: check quorum and disk latency"),
    (
        "database space exceeded",
        "the backend quota is exhausted (NOSPACE alarm): compact and defragment, then "
        "disarm the alarm (etcdctl alarm disarm)",
    ),
    (
        "user name is empty",
        "the cluster has authentication enabled; this backend authenticates with TLS "
        "client certificates only (etcds:// with cert= and key=)",
    ),
    ("permission denied", "the client certificate's user lacks a role on firefly/scheduling/"),
    ("too many requests", "the member is overloaded; its applied index is far behind"),
    ("lease already exists", "an acquisition's lease ID clashed with a live lease; retry"),
    ("404 page not found", "no etcd v3 JSON gateway here (etcd 3.4 or later serves /v3/)"),
    # TLS handshakes: the transport's own messages (OpenSSL's).
    (
        "certificate verify failed",
        "the member's certificate is not signed by a CA this client trusts: set cacert=",
    ),
    ("bad certificate", "the member demands a client certificate: set cert= and key="),
    ("certificate required", "the member demands a client certificate: set cert= and key="),
    ("wrong version number", "the member does not speak TLS here: use etcd:// instead"),
)


def hint(err: BaseException) -> str | None:
    """What an operator should check for `err` (a server answer or a TLS failure), if known."""
    text = (err.message if isinstance(err, EtcdServerError) else str(err)).lower()
    return next((advice for fragment, advice in _HINTS if fragment in text), None)
