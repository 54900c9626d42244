"""The etcd lock protocol over the v3 JSON gateway, written once for every driver.

Nothing here does I/O. Each lock operation is a generator that yields the HTTP
calls it needs (`Call`: a path under `/v3/` and a JSON body, see `messages`) and
receives each `Reply`; its return value is the operation's result. A driver only
pumps it: the asyncio `AsyncEtcdLock` over an `httpx.AsyncClient`
(`asyncio_gateway`), the generated `EtcdLock` over `http.client` (`gateway`), so the
request bodies, the base64 key encoding, the lease rules and the reading of every
answer exist once. A transport error is thrown into the generator, which may clean
up (one more call) before it re-raises. This module holds the operations on one
holding; `batch_leases` those on many names at once.

The data model, for one lock name:

* The key `firefly/scheduling/lock/<name>` (UTF-8, any name is a legal key), whose
  value is the acquisition's owner token, attached to a lease of its own.
* The lease's ID is derived from the owner token (`lease_id`), so an acquisition's
  lease needs no bookkeeping on the client: release and renewal recompute it. IDs
  are 63 random bits; a clash with a live lease is refused by the server ("lease
  already exists") and the attempt fails as a backend error.
* Except for the task locks a resident node takes together
  (`batch_leases.acquire_many`): one
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
* waiting: **1** stream per lock instance while any of its acquisitions waits
  (`watch_releases`), a watch of every lock key's deletion, which a release and a
  lease's expiry both are; a waiter tries again when its key's deletion arrives
  (`deleted_keys`), without the read. Its lease is granted once, after its first
  lost attempt (`grant`), so after a release a waiter's attempt is **1**, the create,
  while the lease is fresh (see `lock_async`), else **2**: a keep-alive that
  refreshes it (no Raft write), the create. The lease is revoked when the wait ends
  without the lock;
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
from collections.abc import Generator
from typing import Any, Final, TypeVar

from firefly_scheduling_etcd.messages import (
    Call,
    EtcdServerError,
    Reply,
    b64,
    call,
    create_if_absent,
    is_not_found,
    ok,
    server_error,
)

logger = logging.getLogger("firefly_scheduling.locks")

LOCK_KEY_PREFIX: Final = "firefly/scheduling/lock/"
_LEASE_ID_MASK: Final = (1 << 63) - 1

T = TypeVar("T")

#: A lock operation: yields calls, receives replies, returns its result.
Operation = Generator[Call, Reply, T]


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


# -- the operations on one holding ----------------------------------------------------


def acquire(
    name: str,
    owner: str,
    ttl_seconds: float,
    *,
    read_first: bool = True,
    granted: bool = False,
    refresh: bool = True,
) -> Operation[int | None]:
    """Take `name` for `owner`; return the fencing token (the key's create_revision) or None.

    1 round trip when `name` is held, 3 when it is free, 4 when a race is lost
    between the read and the create (see the module doc). Without `read_first` (a
    waiter that just saw the key deleted, so likely free) the read is skipped: 2.
    `granted`: a waiter granted the owner's lease before its wait (`grant`), so the
    lease is kept when the create loses, for the waiter's next attempt, and, with
    `refresh`, only refreshed first (`keep_alive`, no Raft write; granted again if it
    lapsed meanwhile). Without `refresh` the create alone is sent: the caller dates
    the holding from the lease's last start.
    """
    key = b64(lock_key(name))
    if read_first:
        held = ok((yield call("kv/range", {"key": key, "count_only": True})))
        if int(held.get("count", 0)) > 0:
            return None
    lease = lease_id(owner)
    create = create_if_absent(key, b64(owner.encode()), lease)
    created = yield from create_on_lease(
        owner, ttl_seconds, create, granted=granted, refresh=refresh
    )
    if created.get("succeeded") is True:
        return int(created["header"]["revision"])
    if not granted:
        yield from revoke_quietly(lease)  # another node created the key since the read
    return None


def create_on_lease(
    owner: str, ttl_seconds: float, create: dict[str, Any], *, granted: bool, refresh: bool
) -> Operation[dict[str, Any]]:
    """Send the transaction `create`, which puts a key on `owner`'s lease; its answer.

    The lease is granted first unless `granted`; with `refresh` too, only kept alive
    (granted again if it lapsed). A failed send revokes the lease: the create may
    have been applied and only its reply lost, and revoking frees the key now
    instead of at the end of its TTL.
    """
    lease = lease_id(owner)
    if not granted or (refresh and (yield from keep_alive(lease)) <= 0):
        yield from grant(owner, ttl_seconds)
    try:
        return ok((yield call("kv/txn", create)))
    except Exception:
        yield from revoke_quietly(lease)
        raise


def grant(owner: str, ttl_seconds: float) -> Operation[None]:
    """Grant the lease of the acquisition whose owner token is `owner` (one Raft write)."""
    ok(
        (
            yield call(
                "lease/grant", {"ID": str(lease_id(owner)), "TTL": str(lease_seconds(ttl_seconds))}
            )
        )
    )


def keep_alive(lease: int) -> Operation[int]:
    """Restart `lease`'s TTL; the TTL in seconds it now runs for, 0 when it is gone."""
    kept = ok((yield call("lease/keepalive", {"ID": str(lease)})))
    return int(kept.get("result", {}).get("TTL", 0))


def release(owner: str) -> Operation[bool]:
    """Revoke the holding's lease, which deletes its key; False if the lease was gone.

    One round trip. Owner-checked by construction: the lease belongs to this
    acquisition alone, and a key is attached to exactly one lease, so revoking it can
    never delete a key another holder created (that key has the other holder's lease).
    """
    reply = yield call("lease/revoke", {"ID": str(lease_id(owner))})
    if is_not_found(reply):
        return False
    ok(reply)
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
    granted = yield from keep_alive(lease)
    if granted <= 0:
        return False  # expired or revoked: the key went with it
    if granted < ttl_seconds:
        raise ValueError(
            f"etcd renews a lease to the TTL it was granted with ({granted} s), not to "
            f"{ttl_seconds!r} s: renew with the TTL the lock was acquired with"
        )
    key = b64(lock_key(name))
    attached = {
        "compare": [{"key": key, "target": "LEASE", "result": "EQUAL", "lease": str(lease)}]
    }
    return ok((yield call("kv/txn", attached))).get("succeeded") is True


def revoke_quietly(lease: int) -> Operation[None]:
    """Revoke a lease nobody needs; a failure only leaves it to expire at its TTL."""
    try:
        reply = yield call("lease/revoke", {"ID": str(lease)})
        if not is_not_found(reply):
            ok(reply)
    except Exception as err:  # noqa: BLE001 - best effort; the lease expires anyway
        logger.debug("etcd: revoking the unused lease %x failed (%s)", lease, err)


# -- waiting: a watch of the lock keys' deletions ------------------------------------


def watch_releases() -> Call:
    """The streaming `watch` of every lock key's deletion (a release, an expiry).

    One watch of the whole prefix, so a lock instance's waiters share one stream
    whatever names they wait for; puts are filtered out on the server.
    """
    prefix = LOCK_KEY_PREFIX.encode("utf-8")
    end = prefix[:-1] + bytes([prefix[-1] + 1])
    request = {"key": b64(prefix), "range_end": b64(end), "filters": ["NOPUT"]}
    return call("watch", {"create_request": request})


def deleted_keys(line: bytes) -> tuple[bool, list[bytes]]:
    """One line of the watch's stream: whether it confirms the watch's creation, and
    the keys it reports deleted. An error line (a cancelled or compacted watch)
    raises `EtcdServerError`, so the watch is treated as lost."""
    document = json.loads(line)
    if not isinstance(document, dict):
        raise EtcdServerError(
            f"a watch line is not an object: {line[:200]!r}", code=None, status=200
        )
    result = document.get("result")
    if not isinstance(result, dict) or result.get("canceled"):
        raise server_error(Reply(200, line), document)
    events = result.get("events") or []
    keys = [
        base64.b64decode(event["kv"]["key"]) for event in events if event.get("type") == "DELETE"
    ]
    return bool(result.get("created")), keys
