"""The etcd queue of a name's waiters, without I/O: etcd's own lock recipe.

The queue's rules are the core's (`locks.ticket_queue_async`); this module is how
etcd keeps it, the way its election and lock recipes do: a waiter's ticket is a key
under the name's queue prefix, attached to a lease of its own, and the queue's order
is the keys' `create_revision`, which etcd's single revision counter makes the order
in which they were created. The first waiter is the key with the lowest one.

* **Keys.** `firefly/scheduling/queue/<name>` NUL `<ticket token>`: a name never
  holds NUL, so one name's prefix (up to the NUL) never covers another's keys.
* **A dead waiter never blocks the queue.** The ticket's lease lives the ticket's
  time (`ticket_seconds`: the longest sleep between attempts plus a grace, whole
  seconds, at least the server's minimum lease TTL); each attempt keeps it alive.
  A killed waiter's lease lapses and etcd deletes its key.
* **Leaving** revokes the ticket's lease, which deletes the key.
* **Winning after a release** (`take_if_first`): one transaction creates the lock
  key only if it is absent and the ticket is still the oldest of the queue, and
  deletes the ticket's key with the create. So after a release the waiter's win is
  one Raft write, as it was before waiters queued; a check of the queue's head, the
  create, then the lease's revocation were three round trips, two of them Raft
  writes, each a chance to be slow. The ticket's lease, left without a key, lapses
  within the ticket's time.

Round trips: joining **2** (the lease's grant, the put), keeping a place **1** (a
keep-alive, no Raft write), checking the queue **1** (a linearizable range of the
prefix sorted by create revision, limit 1, keys only), taking the name when first
**1** (that transaction), leaving **1**.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from firefly_scheduling_etcd.messages import b64, call, create_if_absent, ok, responses, revision
from firefly_scheduling_etcd.protocol import (
    Operation,
    create_on_lease,
    grant,
    keep_alive,
    lease_id,
    lock_key,
    release,
    revoke_quietly,
)

QUEUE_KEY_PREFIX: Final = "firefly/scheduling/queue/"


@dataclass(frozen=True)
class Queued:
    """A waiter's ticket in a name's queue: its token, and its key's create revision."""

    ticket: str
    revision: int


def queue_prefix(name: str) -> bytes:
    """The prefix of every ticket key of `name`'s queue."""
    return (QUEUE_KEY_PREFIX + name).encode("utf-8") + b"\x00"


def ticket_key(name: str, ticket: str) -> bytes:
    """The key of `ticket` in `name`'s queue."""
    return queue_prefix(name) + ticket.encode("ascii")


def _prefix_range(prefix: bytes) -> dict[str, str]:
    return {"key": b64(prefix), "range_end": b64(prefix[:-1] + bytes([prefix[-1] + 1]))}


def join(name: str, ticket: str, seconds: float) -> Operation[Queued]:
    """Grant the ticket's lease for `seconds`, then put its key on it."""
    yield from grant(ticket, seconds)
    lease = lease_id(ticket)
    put = {"key": b64(ticket_key(name, ticket)), "value": b64(b""), "lease": str(lease)}
    try:
        put_done = ok((yield call("kv/put", put)))
    except Exception:
        yield from revoke_quietly(lease)  # the put may have been applied, its reply lost
        raise
    return Queued(ticket, revision(put_done))  # a new key's create revision is the put's


def keep(ticket: str) -> Operation[bool]:
    """Keep the ticket's lease alive; False when it lapsed (its key went with it)."""
    return (yield from keep_alive(lease_id(ticket))) > 0


def first(name: str, ticket: str | None) -> Operation[bool]:
    """Whether `ticket`'s key is the oldest of `name`'s queue (None: the queue is empty)."""
    found = ok((yield call("kv/range", _head(name))))
    keys = [kv["key"] for kv in found.get("kvs") or []]
    if ticket is None:
        return not keys
    return keys == [b64(ticket_key(name, ticket))]


def take_if_first(
    name: str, queued: Queued, owner: str, ttl_seconds: float, *, refresh: bool
) -> Operation[tuple[bool, int | None]]:
    """Take `name` for `owner`, on its lease granted ahead, if `queued` is first.

    One transaction: when the lock key is absent, the ticket's key is still the one
    `queued` created, and no key of the queue is older, it creates the lock key and
    deletes the ticket's; otherwise it reads the queue's head. Whether the ticket is
    first, and the fencing token of a win (else None). `refresh`: as
    `protocol.acquire`'s.
    """
    mine = b64(ticket_key(name, queued.ticket))
    take = create_if_absent(b64(lock_key(name)), b64(owner.encode()), lease_id(owner))
    take["compare"] += [
        {
            "key": mine,
            "target": "CREATE",
            "result": "EQUAL",
            "create_revision": str(queued.revision),
        },
        {
            **_prefix_range(queue_prefix(name)),
            "target": "CREATE",
            "result": "GREATER",
            "create_revision": str(queued.revision - 1),
        },
    ]
    take["success"].append({"request_delete_range": {"key": mine}})
    take["failure"] = [{"request_range": _head(name)}]
    taken = yield from create_on_lease(owner, ttl_seconds, take, granted=True, refresh=refresh)
    if taken.get("succeeded") is True:
        return True, revision(taken)
    head = responses(taken, 1)[0].get("response_range", {}).get("kvs") or []
    return [kv["key"] for kv in head] == [mine], None


def _head(name: str) -> dict[str, Any]:
    """The range request of the oldest ticket key of `name`'s queue, key only."""
    return {
        **_prefix_range(queue_prefix(name)),
        "limit": "1",
        "sort_order": "ASCEND",
        "sort_target": "CREATE",
        "keys_only": True,
    }


def leave(ticket: str) -> Operation[bool]:
    """Revoke the ticket's lease, deleting its key; False when it had lapsed."""
    return (yield from release(ticket))
