"""The etcd lock's operations on many names at once, on leases a batch shares.

A resident node claims the fires of an instant together, then takes the task locks
of the fires it won together, and ends them together. One by one, a claim cost a
read, a lease grant and a transaction, each a round trip and the last two Raft
writes, and a fleet of one-second tasks asked more than etcd commits on one member.
Here the names go 64 to a transaction (`NAMES_PER_TXN`), each as a nested
transaction answered on its own, and the names of one TTL share ONE lease, granted
for the batch (see `protocol` for the data model and the round trips). Like
`protocol`, nothing here does I/O: each operation is a generator of `Call`s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from firefly_scheduling_etcd.messages import (
    b64,
    call,
    carries,
    create_if_absent,
    delete_if_carries,
    ok,
    responses,
    revision,
)
from firefly_scheduling_etcd.protocol import (
    Operation,
    lease_id,
    lease_seconds,
    lock_key,
    revoke_quietly,
)

#: Names per transaction of `claim_many`. etcd refuses a transaction of more than
#: `--max-txn-ops` operations (128 by default), and a nested transaction may only hold
#: what its parent left of that budget (a parent of n operations leaves 128 - n), so
#: 127 nested creates would fit; half the default leaves room for a member configured
#: lower.
NAMES_PER_TXN: Final = 64


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
    member's work and a round trip before the fires. A batch whose every
    name is held costs its grants, one failed transaction and the revokes.
    """
    keys = [b64(lock_key(name)) for name, _, _ in requests]
    tokens: list[int | None] = [None] * len(requests)
    values = {index: b64(owner.encode()) for index, (_, owner, _) in enumerate(requests)}
    seconds = {index: lease_seconds(ttl) for index, (_, _, ttl) in enumerate(requests)}
    created = yield from _create_on_batch_leases(keys, values, seconds, token, read_first=False)
    for index, created_at in created.items():
        tokens[index] = created_at
    return tokens


def claim_many(claims: Sequence[tuple[str, float]], token: str) -> Operation[list[bool]]:
    """Take each free name of `(name, seconds)`; whether each was won, in order.

    A resident node claims the fires of an instant together: one by one, a claim
    cost a read, a lease grant and a transaction, each a round trip and the last two
    Raft writes, and 200 one-second tasks asked more than etcd commits on one
    member. Here the names go 64 at a time: each chunk is read in one
    read-only transaction (no Raft write: a node that loses every claim writes
    nothing), then its free names are created in ONE transaction of nested
    transactions, each creating its key only if it is still absent, on its own: a
    name created by another node since the read is lost alone. The claims of one TTL
    share ONE lease, granted before the batch's first create. Claims are never
    released, only left to expire, so sharing a lease loses nothing. `token` (fresh
    for each batch) derives the leases' IDs, picks the chunk to start from (see
    `_create_on_batch_leases`), and is the keys' value.
    """
    keys = [b64(lock_key(name)) for name, _ in claims]
    value = b64(token.encode())
    values = dict.fromkeys(range(len(claims)), value)
    seconds = {index: lease_seconds(ttl) for index, (_, ttl) in enumerate(claims)}
    created = yield from _create_on_batch_leases(keys, values, seconds, token, read_first=True)
    return [index in created for index in range(len(claims))]


def release_shared(name: str, owner: str) -> Operation[bool]:
    """Delete a batch holding's key, only while it carries `owner`; False if it does not.

    One round trip. The batch lease is not revoked: the other keys of the batch are
    on it, and it expires at its TTL, holding nothing once they are gone.
    """
    delete = delete_if_carries(b64(lock_key(name)), owner)
    return ok((yield call("kv/txn", delete))).get("succeeded") is True


def release_shared_many(held: Sequence[tuple[str, str]]) -> Operation[list[bool]]:
    """`release_shared` for each `(name, owner)`: whether each key was deleted, in order.

    A resident node ends the fires of an instant together, and one delete each was a
    Raft write each, queued at the member behind one another and ahead of the other
    nodes' claims for the same instant. Here one transaction of nested
    owner-checked deletes per 64 holdings: each nested transaction compares its own
    key's value, so a holding whose key was taken over is answered False alone, and
    its key is left to its new holder. A key appears at most once per transaction
    (etcd refuses a transaction that writes one key twice), so two holdings of one
    name go in two transactions.
    """
    keys = [b64(lock_key(name)) for name, _ in held]
    released = [False] * len(held)
    for chunk in _distinct_chunks(keys):
        deletes = [
            {"request_txn": delete_if_carries(keys[index], held[index][1])} for index in chunk
        ]
        reply = ok((yield call("kv/txn", {"success": deletes})))
        for index, response in zip(chunk, responses(reply, len(chunk)), strict=True):
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
    key = b64(lock_key(name))
    lease = lease_id(owner)
    ok((yield call("lease/grant", {"ID": str(lease), "TTL": str(lease_seconds(ttl_seconds))})))
    move = {
        "compare": [carries(key, owner)],
        "success": [
            {"request_put": {"key": key, "value": b64(owner.encode()), "lease": str(lease)}}
        ],
    }
    try:
        moved = ok((yield call("kv/txn", move))).get("succeeded") is True
    except Exception:
        yield from revoke_quietly(lease)
        raise
    if not moved:
        yield from revoke_quietly(lease)
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
                    ok((yield call("lease/grant", grant)))
                    granted.append(by_ttl[ttl])
            leases = {index: by_ttl[seconds[index]] for index in free}
            created |= yield from _create_each(keys, free, values, leases)
    except Exception:
        for lease in granted:
            yield from revoke_quietly(lease)
        raise
    for ttl, lease in by_ttl.items():
        unused = not any(index in created for index, of in seconds.items() if of == ttl)
        if lease in granted and unused:
            yield from revoke_quietly(lease)
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
        answered = responses(ok((yield call("kv/txn", {"success": reads}))), len(chunk))
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
            {"request_txn": create_if_absent(keys[index], values[index], leases[index])}
            for index in chunk
        ]
        reply = ok((yield call("kv/txn", {"success": creates})))
        for index, response in zip(chunk, responses(reply, len(chunk)), strict=True):
            if response.get("response_txn", {}).get("succeeded") is True:
                created[index] = revision(reply)
    return created


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
