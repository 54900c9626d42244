"""The etcd lock protocol over the v3 JSON gateway, written once for every driver.

Nothing here does I/O. Each lock operation is a generator that yields the HTTP
calls it needs (`Call`: a path under `/v3/` and a JSON body) and receives each
`Reply`; its return value is the operation's result. A driver only pumps it: the
sync `EtcdLock` with an `httpx.Client`, the asyncio twin with an `httpx.AsyncClient`,
so the request bodies, the base64 key encoding, the lease rules and the reading of
every answer exist once. A transport error is thrown into the generator, which may
clean up (one more call) before it re-raises.

The data model, for one lock name:

* The key `firefly/scheduling/lock/<name>` (UTF-8, any name is a legal key), whose
  value is the acquisition's owner token, attached to a lease of its own.
* The lease's ID is derived from the owner token (`lease_id`), so an acquisition's
  lease needs no bookkeeping on the client: release and renewal recompute it. IDs
  are 63 random bits; a clash with a live lease is refused by the server ("lease
  already exists") and the attempt fails as a backend error.
* Except for the task locks a resident node takes together (`acquire_many`): one
  lease per TTL is granted for the whole batch (a grant is a Raft write, and 100 of
  them one after another made fires hundreds of milliseconds late). Nobody keeps a
  batch lease alive, so each of its keys still expires one TTL after the grant. A
  batch holding is released by deleting its key only while the key carries its
  owner token (`release_shared`); its first renewal moves its key to a lease of its
  own (`renew_shared`), after which it is an ordinary holding. The lock remembers
  which holdings are still on a batch lease (`batch_holdings`).
* The fencing token is the key's `create_revision`: the revision of the transaction
  that created it, which etcd's single, cluster-wide revision counter makes greater
  than every earlier creation of the key. No separate counter, nothing that can
  drift from the lock.

Round trips (one HTTP request each; the TTL is whole seconds, rounded up, and never
less than the server's minimum lease TTL, 2 s by default):

* acquire, name held: **1** (a linearizable read of the key; nothing is written, so
  the nodes that lose a contended lock cost the cluster no Raft write);
* acquire, name free: **3** (that read, the lease grant, the create-if-absent
  transaction); **4** when another node created the key between the read and the
  transaction: the unused lease is revoked;
* the task locks of the fires a node won, together (`acquire_many`): **2** (one
  lease grant per distinct TTL, one transaction of nested create-if-absent
  transactions per 64 names), and a revoke per lease none of whose names was free;
* fire claims of one instant (`claim_many`): per 64 names, **1** when every name
  is held (one read-only transaction of count-only ranges), **2** when some are
  free (that read, then one transaction of nested create-if-absent transactions),
  and once per batch one lease grant shared by the claims of one TTL: claims are
  never released, only left to expire, so they need no lease of their own;
* release: **1** (revoking the lease deletes the key with it; for a batch holding, the
  owner-checked delete); the releases of batch holdings that wait for one another:
  **1** per 64, one transaction of nested owner-checked deletes
  (`release_shared_many`);
* renew: **2** (a keep-alive of this holding's lease, then a read-only check that the
  key is still attached to it); **1** when the lease is already gone. The first
  renewal of a batch holding: **2** (its own lease's grant, then the owner-checked
  move of its key to that lease).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

logger = logging.getLogger("firefly_scheduling.locks")

API_PREFIX: Final = "/v3/"
LOCK_KEY_PREFIX: Final = "firefly/scheduling/lock/"
#: gRPC status codes the gateway reports in error bodies.
NOT_FOUND: Final = 5
_LEASE_ID_MASK: Final = (1 << 63) - 1
#: Names per transaction of `claim_many`. etcd refuses a transaction of more than
#: `--max-txn-ops` operations (128 by default), and a nested transaction may only hold
#: what its parent left of that budget (a parent of n operations leaves 128 - n), so
#: 127 nested creates would fit; half the default leaves room for a member configured
#: lower.
NAMES_PER_TXN: Final = 64

T = TypeVar("T")


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


#: A lock operation: yields calls, receives replies, returns its result.
Operation = Generator[Call, Reply, T]


class EtcdServerError(Exception):
    """The gateway answered with an error: etcd's message, gRPC code and HTTP status."""

    def __init__(self, message: str, *, code: int | None, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


# -- keys, leases, TTLs ----------------------------------------------------------------


def lock_key(name: str) -> bytes:
    """The etcd key of the lock `name`: the prefix and the name's UTF-8 bytes.

    etcd keys are arbitrary bytes (limited only by the request size, 1.5 MiB by
    default), so prefix + name is injective and readable with `etcdctl get --prefix
    firefly/scheduling/lock/`. A name that is not valid Unicode raises `ValueError`.
    """
    return (LOCK_KEY_PREFIX + name).encode("utf-8")


def lease_id(owner: str) -> int:
    """The lease ID of the acquisition whose owner token is `owner`: 63 bits, never 0.

    0 would ask the server to choose an ID, which the client could not recompute.
    """
    digest = hashlib.sha256(owner.encode("utf-8")).digest()
    return (int.from_bytes(digest[:8], "big") & _LEASE_ID_MASK) or 1


def lease_seconds(ttl_seconds: float) -> int:
    """The lease TTL for `ttl_seconds`: whole seconds, rounded up, so never shorter."""
    return max(1, math.ceil(ttl_seconds))


# -- the operations ----------------------------------------------------------------------


def acquire(name: str, owner: str, ttl_seconds: float) -> Operation[int | None]:
    """Take `name` for `owner`; return the fencing token (the key's create_revision) or None.

    1 round trip when `name` is held, 3 when it is free, 4 when a race is lost
    between the read and the create (see the module doc).
    """
    key = _b64(lock_key(name))
    held = _ok((yield _call("kv/range", {"key": key, "count_only": True})))
    if int(held.get("count", 0)) > 0:
        return None
    lease = lease_id(owner)
    _ok((yield _call("lease/grant", {"ID": str(lease), "TTL": str(lease_seconds(ttl_seconds))})))
    create = _create_if_absent(key, _b64(owner.encode()), lease)
    try:
        created = _ok((yield _call("kv/txn", create)))
    except Exception:
        # The create may have been applied and only its reply lost: revoking the lease
        # frees the key now instead of at the end of its TTL.
        yield from _revoke_quietly(lease)
        raise
    if created.get("succeeded") is True:
        return int(created["header"]["revision"])
    yield from _revoke_quietly(lease)  # another node created the key since the read
    return None


def acquire_many(
    requests: Sequence[tuple[str, str, float]], token: str
) -> Operation[list[int | None]]:
    """Take each free name of `(name, owner, seconds)`; each one's fencing token, or None.

    A resident node takes the task locks of the fires it won together with their
    claims (`batch_acquires`). One by one, each cost a read, a grant and a create:
    three round trips, two of them Raft writes. Here the batch gets ONE lease per
    distinct TTL (its ID derived from `token`, fresh for each batch), and one
    transaction of nested create-if-absent transactions per 64 names creates each
    key with its own owner token as the value: a name held elsewhere is lost alone.
    The keys created together share that transaction's revision, their fencing
    token, which is still greater than every earlier creation of each name. The
    holdings are then on a batch lease: see the module doc for how they are
    released and renewed.

    Unlike the claims, no read comes first. A claim is tried by every node and lost
    by all but one, so a read spares the losers a write; a task lock is taken right
    after its fire's claim was won, and is free unless the task's previous run is
    still going. At 200 tasks on 2 nodes the read of every name was a tenth of the
    member's work and a round trip before the fires (issue 12). A batch whose every
    name is held costs its grants, one failed transaction and the revokes.
    """
    keys = [_b64(lock_key(name)) for name, _, _ in requests]
    tokens: list[int | None] = [None] * len(requests)
    values = {index: _b64(owner.encode()) for index, (_, owner, _) in enumerate(requests)}
    seconds = {index: lease_seconds(ttl) for index, (_, _, ttl) in enumerate(requests)}
    created = yield from _create_on_batch_leases(keys, values, seconds, token, read_first=False)
    for index, revision in created.items():
        tokens[index] = revision
    return tokens


def claim_many(claims: Sequence[tuple[str, float]], token: str) -> Operation[list[bool]]:
    """Take each free name of `(name, seconds)`; whether each was won, in order.

    A resident node claims the fires of an instant together: one by one, a claim
    cost a read, a lease grant and a transaction, each a round trip and the last two
    Raft writes, and 200 one-second tasks asked more than etcd commits on one
    member (issue 12). Here the names go 64 at a time: each chunk is read in one
    read-only transaction (no Raft write: a node that loses every claim writes
    nothing), then its free names are created in ONE transaction of nested
    transactions, each creating its key only if it is still absent, on its own: a
    name created by another node since the read is lost alone. The claims of one TTL
    share ONE lease, granted before the batch's first create. Claims are never
    released, only left to expire, so sharing a lease loses nothing. `token` (fresh
    for each batch) derives the leases' IDs, picks the chunk to start from (see
    `_create_on_batch_leases`), and is the keys' value.
    """
    keys = [_b64(lock_key(name)) for name, _ in claims]
    value = _b64(token.encode())
    values = dict.fromkeys(range(len(claims)), value)
    seconds = {index: lease_seconds(ttl) for index, (_, ttl) in enumerate(claims)}
    created = yield from _create_on_batch_leases(keys, values, seconds, token, read_first=True)
    return [index in created for index in range(len(claims))]


def release_shared(name: str, owner: str) -> Operation[bool]:
    """Delete a batch holding's key, only while it carries `owner`; False if it does not.

    One round trip. The batch lease is not revoked: the other keys of the batch are
    on it, and it expires at its TTL, holding nothing once they are gone.
    """
    delete = _delete_if_carries(_b64(lock_key(name)), owner)
    return _ok((yield _call("kv/txn", delete))).get("succeeded") is True


def release_shared_many(held: Sequence[tuple[str, str]]) -> Operation[list[bool]]:
    """`release_shared` for each `(name, owner)`: whether each key was deleted, in order.

    A resident node ends the fires of an instant together, and one delete each was a
    Raft write each, queued at the member behind one another and ahead of the other
    nodes' claims for the same instant (issue 12). Here one transaction of nested
    owner-checked deletes per 64 holdings: each nested transaction compares its own
    key's value, so a holding whose key was taken over is answered False alone, and
    its key is left to its new holder. A key appears at most once per transaction
    (etcd refuses a transaction that writes one key twice), so two holdings of one
    name go in two transactions.
    """
    keys = [_b64(lock_key(name)) for name, _ in held]
    released = [False] * len(held)
    for chunk in _distinct_chunks(keys):
        deletes = [
            {"request_txn": _delete_if_carries(keys[index], held[index][1])} for index in chunk
        ]
        reply = _ok((yield _call("kv/txn", {"success": deletes})))
        for index, response in zip(chunk, _responses(reply, len(chunk)), strict=True):
            released[index] = response.get("response_txn", {}).get("succeeded") is True
    return released


def renew_shared(name: str, owner: str, ttl_seconds: float) -> Operation[bool]:
    """Move a batch holding's key to a lease of its own, granted now; False if it is gone.

    A keep-alive of the batch lease would extend every key on it, including a
    holding its holder stopped renewing; so the first renewal grants this holding's
    own lease (`lease_id(owner)`, as `acquire` would have) and, in one transaction,
    puts the key on it only while the key still carries `owner`. The key keeps its
    `create_revision`, so the fencing token is unchanged. Later renewals are
    ordinary ones (`renew`). If the move fails, or its reply is lost, the new lease
    is revoked: a key that did move then goes with it, so nothing is left held by a
    lease nobody renews.
    """
    key = _b64(lock_key(name))
    lease = lease_id(owner)
    _ok((yield _call("lease/grant", {"ID": str(lease), "TTL": str(lease_seconds(ttl_seconds))})))
    move = {
        "compare": [_carries(key, owner)],
        "success": [
            {"request_put": {"key": key, "value": _b64(owner.encode()), "lease": str(lease)}}
        ],
    }
    try:
        moved = _ok((yield _call("kv/txn", move))).get("succeeded") is True
    except Exception:
        yield from _revoke_quietly(lease)
        raise
    if not moved:
        yield from _revoke_quietly(lease)
    return moved


def _create_on_batch_leases(
    keys: Sequence[str],
    values: dict[int, str],
    seconds: dict[int, int],
    token: str,
    *,
    read_first: bool,
) -> Operation[dict[int, int]]:
    """Create the keys of `values`' indexes on one new lease per distinct TTL of `seconds`.

    The created ones, with their create_revision. The keys go in chunks of 64, in the
    order of their encoded keys (the same on every node), starting at a chunk chosen
    by `token`; each chunk is read first when
    `read_first` (only its free keys are then created, and a chunk with none writes
    nothing), and a lease is granted just before the first create that needs it.
    Two nodes claiming the same instant then mostly start on different chunks, and
    each reads the chunks the other has created as held instead of sending creates
    that would all fail: half the member's create work, at 200 tasks on 2 nodes. A
    lease whose every create lost is revoked. On a failure after the first grant,
    every granted lease is revoked (deleting any key already created: a transaction
    may have been applied and only its reply lost) and the error re-raised, so no
    key of the batch is left standing unanswered.
    """
    by_ttl = {ttl: lease_id(f"{token}/{ttl}") for ttl in sorted(set(seconds.values()))}
    granted: list[int] = []
    created: dict[int, int] = {}
    try:
        for chunk in _rotated_chunks(keys, list(values), token):
            free = (yield from _absent(keys, chunk)) if read_first else chunk
            for ttl in sorted({seconds[index] for index in free}):
                if by_ttl[ttl] not in granted:
                    grant = {"ID": str(by_ttl[ttl]), "TTL": str(ttl)}
                    _ok((yield _call("lease/grant", grant)))
                    granted.append(by_ttl[ttl])
            leases = {index: by_ttl[seconds[index]] for index in free}
            created |= yield from _create_each(keys, free, values, leases)
    except Exception:
        for lease in granted:
            yield from _revoke_quietly(lease)
        raise
    for ttl, lease in by_ttl.items():
        unused = not any(index in created for index, of in seconds.items() if of == ttl)
        if lease in granted and unused:
            yield from _revoke_quietly(lease)
    return created


def _rotated_chunks(keys: Sequence[str], indexes: Sequence[int], token: str) -> list[list[int]]:
    """`indexes` in the order of their keys, in chunks of 64, from a chunk `token` picks."""
    ordered = sorted(indexes, key=keys.__getitem__)
    chunks = [list(chunk) for chunk in _chunks(ordered)]
    if not chunks:
        return []
    first = int(hashlib.sha256(token.encode()).hexdigest()[:8], 16) % len(chunks)
    return chunks[first:] + chunks[:first]


def _absent(keys: Sequence[str], indexes: Sequence[int]) -> Operation[list[int]]:
    """Those of `indexes` whose key (base64) holds nothing: read-only transactions of
    count-only ranges, one per 64 keys, so nothing is written (no Raft entry)."""
    free: list[int] = []
    for chunk in _chunks(indexes):
        reads = [{"request_range": {"key": keys[index], "count_only": True}} for index in chunk]
        answered = _responses(_ok((yield _call("kv/txn", {"success": reads}))), len(chunk))
        for index, response in zip(chunk, answered, strict=True):
            if int(response.get("response_range", {}).get("count", 0)) == 0:
                free.append(index)
    return free


def _create_each(
    keys: Sequence[str], indexes: Sequence[int], values: dict[int, str], leases: dict[int, int]
) -> Operation[dict[int, int]]:
    """Create each key of `indexes` that is still absent, with its value and lease.

    One transaction of nested create-if-absent transactions per 64 keys, so each
    key is answered on its own. Returns the created ones, with the revision of the
    transaction that created them (their `create_revision`).
    """
    created: dict[int, int] = {}
    for chunk in _chunks(indexes):
        creates = [
            {"request_txn": _create_if_absent(keys[index], values[index], leases[index])}
            for index in chunk
        ]
        reply = _ok((yield _call("kv/txn", {"success": creates})))
        for index, response in zip(chunk, _responses(reply, len(chunk)), strict=True):
            if response.get("response_txn", {}).get("succeeded") is True:
                created[index] = _revision(reply)
    return created


def _revision(document: dict[str, Any]) -> int:
    """The store's revision after a write: the fencing token of the keys it created."""
    revision = int(document.get("header", {}).get("revision", 0))
    if revision <= 0:
        raise EtcdServerError(
            f"the gateway answered a write without a revision: {document.get('header')!r}",
            code=None,
            status=200,
        )
    return revision


def release(owner: str) -> Operation[bool]:
    """Revoke the holding's lease, which deletes its key; False if the lease was gone.

    One round trip. Owner-checked by construction: the lease belongs to this
    acquisition alone, and a key is attached to exactly one lease, so revoking it can
    never delete a key another holder created (that key has the other holder's lease).
    """
    reply = yield _call("lease/revoke", {"ID": str(lease_id(owner))})
    if _is_not_found(reply):
        return False
    _ok(reply)
    return True


def renew(name: str, owner: str, ttl_seconds: float) -> Operation[bool]:
    """Keep the holding's lease alive; True only if the key is still attached to it.

    The keep-alive restarts the lease's TTL at the value it was granted with; etcd
    cannot change a lease's TTL, so a renewal asking for more than that is refused
    with `ValueError` (renew with the TTL you acquired with). Owner-checked twice:
    the lease is this acquisition's own, so a lapsed holding's keep-alive finds its
    lease gone and can never extend a newer holder's; and the second, read-only call
    checks that the key still carries this lease, so a key deleted by hand (an
    operator's `etcdctl del`) is reported lost rather than renewed.
    """
    lease = lease_id(owner)
    kept = _ok((yield _call("lease/keepalive", {"ID": str(lease)})))
    granted = int(kept.get("result", {}).get("TTL", 0))
    if granted <= 0:
        return False  # expired or revoked: the key went with it
    if granted < ttl_seconds:
        raise ValueError(
            f"etcd renews a lease to the TTL it was granted with ({granted} s), not to "
            f"{ttl_seconds!r} s: renew with the TTL the lock was acquired with"
        )
    key = _b64(lock_key(name))
    attached = {
        "compare": [{"key": key, "target": "LEASE", "result": "EQUAL", "lease": str(lease)}]
    }
    return _ok((yield _call("kv/txn", attached))).get("succeeded") is True


def _revoke_quietly(lease: int) -> Operation[None]:
    """Revoke a lease nobody needs; a failure only leaves it to expire at its TTL."""
    try:
        reply = yield _call("lease/revoke", {"ID": str(lease)})
        if not _is_not_found(reply):
            _ok(reply)
    except Exception as err:  # noqa: BLE001 - best effort; the lease expires anyway
        logger.debug("etcd: revoking the unused lease %x failed (%s)", lease, err)


# -- encoding and reading --------------------------------------------------------------------


def _create_if_absent(key: str, value: str, lease: int) -> dict[str, Any]:
    """A transaction creating `key` (base64) with `value` and `lease`, only if it is absent."""
    return {
        "compare": [{"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}],
        "success": [{"request_put": {"key": key, "value": value, "lease": str(lease)}}],
    }


def _delete_if_carries(key: str, owner: str) -> dict[str, Any]:
    """A transaction deleting `key` (base64) only while it carries the value `owner`."""
    return {
        "compare": [_carries(key, owner)],
        "success": [{"request_delete_range": {"key": key}}],
    }


def _carries(key: str, owner: str) -> dict[str, str]:
    """The comparison "`key` (base64) holds the value `owner`": false for an absent key."""
    return {"key": key, "target": "VALUE", "result": "EQUAL", "value": _b64(owner.encode())}


def _chunks(indexes: Sequence[int]) -> list[Sequence[int]]:
    return [
        indexes[start : start + NAMES_PER_TXN] for start in range(0, len(indexes), NAMES_PER_TXN)
    ]


def _distinct_chunks(keys: Sequence[str]) -> list[list[int]]:
    """The indexes of `keys` in order, cut into chunks of at most 64 distinct keys."""
    chunks: list[list[int]] = [[]]
    seen: set[str] = set()
    for index, key in enumerate(keys):
        if len(chunks[-1]) == NAMES_PER_TXN or key in seen:
            chunks.append([])
            seen = set()
        chunks[-1].append(index)
        seen.add(key)
    return [chunk for chunk in chunks if chunk]


def _responses(document: dict[str, Any], count: int) -> list[dict[str, Any]]:
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


def _call(path: str, body: dict[str, Any]) -> Call:
    return Call(API_PREFIX + path, json.dumps(body, separators=(",", ":")).encode())


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _ok(reply: Reply) -> dict[str, Any]:
    """The reply's JSON document, or `EtcdServerError` for any error answer."""
    document = _document(reply)
    error = document.get("error") if document is not None else None
    if document is not None and reply.status == 200 and error is None:
        return document
    raise _server_error(reply, document)


def _is_not_found(reply: Reply) -> bool:
    document = _document(reply)
    return reply.status == 404 and document is not None and document.get("code") == NOT_FOUND


def _document(reply: Reply) -> dict[str, Any] | None:
    try:
        document = json.loads(reply.body)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _server_error(reply: Reply, document: dict[str, Any] | None) -> EtcdServerError:
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
