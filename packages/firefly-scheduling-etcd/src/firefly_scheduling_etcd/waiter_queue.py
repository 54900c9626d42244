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

Round trips: joining **2** (the lease's grant, the put), keeping a place **1** (a
keep-alive, no Raft write), checking the queue **1** (a linearizable range of the
prefix sorted by create revision, limit 1, keys only), leaving **1**.
"""

from __future__ import annotations

from typing import Final

from firefly_scheduling_etcd.messages import b64, call, ok
from firefly_scheduling_etcd.protocol import (
    Operation,
    grant,
    keep_alive,
    lease_id,
    release,
    revoke_quietly,
)

QUEUE_KEY_PREFIX: Final = "firefly/scheduling/queue/"


def queue_prefix(name: str) -> bytes:
    """The prefix of every ticket key of `name`'s queue."""
    return (QUEUE_KEY_PREFIX + name).encode("utf-8") + b"\x00"


def ticket_key(name: str, ticket: str) -> bytes:
    """The key of `ticket` in `name`'s queue."""
    return queue_prefix(name) + ticket.encode("ascii")


def _prefix_range(prefix: bytes) -> dict[str, str]:
    return {"key": b64(prefix), "range_end": b64(prefix[:-1] + bytes([prefix[-1] + 1]))}


def join(name: str, ticket: str, seconds: float) -> Operation[None]:
    """Grant the ticket's lease for `seconds`, then put its key on it."""
    yield from grant(ticket, seconds)
    lease = lease_id(ticket)
    put = {"key": b64(ticket_key(name, ticket)), "value": b64(b""), "lease": str(lease)}
    try:
        ok((yield call("kv/put", put)))
    except Exception:
        yield from revoke_quietly(lease)  # the put may have been applied, its reply lost
        raise


def keep(ticket: str) -> Operation[bool]:
    """Keep the ticket's lease alive; False when it lapsed (its key went with it)."""
    return (yield from keep_alive(lease_id(ticket))) > 0


def first(name: str, ticket: str | None) -> Operation[bool]:
    """Whether `ticket`'s key is the oldest of `name`'s queue (None: the queue is empty)."""
    request = {
        **_prefix_range(queue_prefix(name)),
        "limit": "1",
        "sort_order": "ASCEND",
        "sort_target": "CREATE",
        "keys_only": True,
    }
    found = ok((yield call("kv/range", request)))
    keys = [kv["key"] for kv in found.get("kvs") or []]
    if ticket is None:
        return not keys
    return keys == [b64(ticket_key(name, ticket))]


def leave(ticket: str) -> Operation[bool]:
    """Revoke the ticket's lease, deleting its key; False when it had lapsed."""
    return (yield from release(ticket))
