"""The memcached lock protocol in meta commands, written once for both flavours.

Nothing here does I/O. Each lock operation is a generator that yields requests
(`Request`: the bytes of one or more pipelined commands, and how many replies they
draw) and receives the parsed replies of each; its return value is the operation's
result. A driver only pumps it over one connection: `AsyncMemcachedLock` over asyncio
streams, the generated `MemcachedLock` over a blocking socket. So the command bytes,
the reading of every reply, and the owner and CAS rules exist once. Cutting the
replies from the byte stream, and their status codes, are `replies`'.

The data model, for one lock name:

* The lock item `firefly:scheduling:lock:<name>` holds the acquisition's owner token
  and expires with the lease; memcached frees it at the TTL.
* The counter item `firefly:scheduling:fence:<name>` never expires; its increments
  are the fencing tokens.

Round trips (each one write and one read on one connection):

* acquire: **1**, `add <key> 0 <exp> <len>` (refused if the item exists);
* fenced acquire: **1**, the add and `ma <counter> N0 J<seed> v` pipelined in one write;
* release: **2**, `mg <key> v c` (value and CAS), then `md <key> C<cas>` only when the
  value is this owner's token: the delete happens only if the item is unchanged since
  the read, so a late release never frees a newer holder;
* renew: **2**, the same read, then `cas <key> 0 <exp> <len> <cas>` (store the same
  token with the new expiry, only if unchanged since the read).
* a batch (a resident host's claims, or the task locks of the fires it won): the
  operations run in step (`together`), each round trip's commands in one write, up
  to `BATCH_OPERATIONS` operations per write.

Storing uses the classic `add` and `cas`, never the meta set `ms`: when memcached
cannot allocate the new item (a full server under `-M`), `ms` in any mode (add,
replace, with or without a CAS check) deletes the existing item on its way out
(memcached 1.6.18, tested in `test_memcached_faults`), so a contender's refused
attempt would free the holder's lock. `add` and `cas` leave it in place.

memcached has no conditional touch, so a renewal stores a new copy of the item:
under `-M` a full server refuses it with `SERVER_ERROR out of memory`, which the lock
reports as a failed renewal (the lease still runs), not a loss. A release allocates
nothing.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Generator, Sequence
from typing import Final, NamedTuple, TypeVar

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.server_keys import ServerKeyScheme
from firefly_scheduling_memcached.replies import (
    DONE,
    EXISTS,
    META_EXISTS,
    META_NOT_FOUND,
    MISS,
    NOT_FOUND,
    NOT_STORED,
    STORED,
    VALUE,
    MemcachedError,
    Reply,
    unexpected,
)

T = TypeVar("T")

#: memcached reads an expiry above this many seconds (30 days) as an absolute Unix time.
MAX_RELATIVE_EXPIRY: Final = 30 * 24 * 3600
#: The expiry field is a signed 32-bit integer: absolute times end in January 2038.
MAX_ABSOLUTE_EXPIRY: Final = 2**31 - 1

# Printable ASCII except the space: legal in a text-protocol key exactly as written.
# Anything else (spaces, control characters, non-ASCII, names too long once prefixed to
# fit 250 bytes) becomes a SHA-256 digest. The hashed prefixes differ from the readable
# ones right after "lock"/"fence", so the two forms can never produce the same key.
_KEY_SAFE: Final = re.compile(r"[!-~]+")
LOCK_KEYS: Final = ServerKeyScheme(
    readable_prefix="firefly:scheduling:lock:",
    hashed_prefix="firefly:scheduling:lock-sha256:",
    max_length=250,
    readable=_KEY_SAFE,
)
FENCE_KEYS: Final = ServerKeyScheme(
    readable_prefix="firefly:scheduling:fence:",
    hashed_prefix="firefly:scheduling:fence-sha256:",
    max_length=250,
    readable=_KEY_SAFE,
)

# The CAS value of every item on a server started with -C (CAS disabled).
_CAS_DISABLED: Final = b"0"


class Request(NamedTuple):
    """Commands to send in one write, and the number of replies they draw."""

    data: bytes
    replies: int


#: A lock operation: yields requests, receives their replies, returns its result.
Operation = Generator[Request, list[Reply], T]


# -- keys and expiry ---------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)  # names repeat (one per task): skip the regex and digest
def lock_key(name: str) -> str:
    """The memcached key of the lock `name`: readable when safe, else a SHA-256 digest."""
    return LOCK_KEYS.key(name)


@functools.lru_cache(maxsize=4096)
def fence_key(name: str) -> str:
    """The memcached key of the fencing counter of `name`; it never expires."""
    return FENCE_KEYS.key(name)


@functools.lru_cache(maxsize=4096)
def _lock_key_bytes(name: str) -> bytes:
    return lock_key(name).encode()


def server_expiry(ttl_seconds: float, now: float) -> int:
    """The expiry field for a lease of `ttl_seconds` stored at Unix time `now`.

    memcached's clock ticks once a second, so an item stored with expiry `n` lives
    somewhere between `n - 1` and `n` seconds. Hence the TTL is rounded up to whole
    seconds and one second is added: the lock lives at least `ttl_seconds` and less
    than `ttl_seconds + 2`.

    memcached reads an expiry over 30 days as an absolute Unix time, so a longer TTL
    is sent as `now + ttl_seconds` rounded up. That instant comes from this node's
    clock and is compared with the server's: a skew between them shortens or
    lengthens such a lease by the skew. Absolute times end in January 2038.
    """
    relative = math.ceil(ttl_seconds) + 1
    if relative <= MAX_RELATIVE_EXPIRY:
        return relative
    absolute = math.ceil(now + ttl_seconds)
    if absolute > MAX_ABSOLUTE_EXPIRY:
        raise ConfigurationError(
            f"ttl_seconds={ttl_seconds!r} ends after memcached's last expiry time "
            f"(Unix time {MAX_ABSOLUTE_EXPIRY}, January 2038)"
        )
    return absolute


# -- the operations ----------------------------------------------------------------------


def acquire(name: str, owner: str, ttl_seconds: float) -> Operation[bool]:
    """Add the lock item holding `owner` unless it exists: one round trip."""
    (added,) = yield Request(_add(name, owner, ttl_seconds), 1)
    return _added(added)


def acquire_fenced(name: str, owner: str, ttl_seconds: float) -> Operation[int | None]:
    """Add the lock item and increment its counter in one write: one round trip.

    memcached has no multi-command atomicity, but it runs one connection's commands
    in order, so the increment runs after the add, while the new holding is in
    force: its token is greater than every earlier holding's, whose increments all
    ran before that holding was released or expired. The increment runs even when
    the add is refused; that only leaves a gap in the tokens, which need not be
    consecutive. A counter the server cannot increment frees the new holding again.
    """
    added, counted = yield Request(_add(name, owner, ttl_seconds) + increment_command(name), 2)
    if not _added(added):
        return None
    try:
        return incremented_value(counted)
    except MemcachedError:
        yield from release(name, owner)
        raise


def fence(name: str) -> Operation[int]:
    """Increment the counter of `name`: one round trip."""
    (counted,) = yield Request(increment_command(name), 1)
    return incremented_value(counted)


def release(name: str, owner: str) -> Operation[bool]:
    """Delete the lock item only if it holds `owner` and is unchanged since it was read."""
    key = _lock_key_bytes(name)
    (found,) = yield Request(b"mg %s v c\r\n" % key, 1)
    cas = owned_cas(found, owner)
    if cas is None:
        return False
    (deleted,) = yield Request(b"md %s C%s\r\n" % (key, cas), 1)
    if deleted.status == DONE:
        return True
    if deleted.status in (META_EXISTS, META_NOT_FOUND):
        return False
    raise unexpected(deleted, "meta delete")


def renew(name: str, owner: str, ttl_seconds: float) -> Operation[bool]:
    """Store `owner` again with a new expiry, only if the item is still its, unchanged."""
    key = _lock_key_bytes(name)
    (found,) = yield Request(b"mg %s v c\r\n" % key, 1)
    cas = owned_cas(found, owner)
    if cas is None:
        return False
    token = owner.encode()
    expire = server_expiry(ttl_seconds, time.time())
    (stored,) = yield Request(
        b"cas %s 0 %d %d %s\r\n%s\r\n" % (key, expire, len(token), cas, token), 1
    )
    if stored.status == STORED:
        return True
    if stored.status in (EXISTS, NOT_FOUND):
        return False
    raise unexpected(stored, "cas")


# -- commands ------------------------------------------------------------------------------


#: The most operations `together` sends in one write: a batch's request stays a few
#: kilobytes, well inside the socket buffers, so the server never waits for the client
#: to read replies while the client still writes.
BATCH_OPERATIONS: Final = 64


def together(operations: Sequence[Operation[T]]) -> Operation[list[T | MemcachedError]]:
    """Run several operations in step: each round's requests go as one write.

    memcached runs one connection's commands in order, so the operations act as if
    sent one after another, in the time of the longest one's round trips. An error
    an operation raises on its own replies (a refusal, `SERVER_ERROR`; a reply it
    cannot use) is that operation's answer, and the others go on: the parser took
    each reply whole, so the stream is in step. A reply the parser cannot read
    (`MemcachedProtocolError`, raised by the driver's exchange) ends them all.
    Operations are taken `BATCH_OPERATIONS` at a time.
    """
    answers: list[T | MemcachedError] = []
    for start in range(0, len(operations), BATCH_OPERATIONS):
        answers.extend((yield from _in_step(operations[start : start + BATCH_OPERATIONS])))
    return answers


def _in_step(operations: Sequence[Operation[T]]) -> Operation[list[T | MemcachedError]]:
    answers: dict[int, T | MemcachedError] = {}
    waiting: dict[int, Request] = {}
    for index, operation in enumerate(operations):
        _step(index, operation, None, waiting, answers)
    while waiting:
        order = list(waiting)
        requests = [waiting[index] for index in order]
        replies = yield Request(
            b"".join(request.data for request in requests),
            sum(request.replies for request in requests),
        )
        waiting = {}
        start = 0
        for index, request in zip(order, requests, strict=True):
            own = replies[start : start + request.replies]
            start += request.replies
            _step(index, operations[index], own, waiting, answers)
    return [answers[index] for index in range(len(operations))]


def _step(
    index: int,
    operation: Operation[T],
    replies: list[Reply] | None,
    waiting: dict[int, Request],
    answers: dict[int, T | MemcachedError],
) -> None:
    """Give `operation` its replies (None: start it); note its next request or its end."""
    try:
        waiting[index] = next(operation) if replies is None else operation.send(replies)
    except StopIteration as finished:
        answers[index] = finished.value
    except MemcachedError as failed:
        answers[index] = failed


def _add(name: str, owner: str, ttl_seconds: float) -> bytes:
    token = owner.encode()
    expire = server_expiry(ttl_seconds, time.time())
    return b"add %s 0 %d %d\r\n%s\r\n" % (_lock_key_bytes(name), expire, len(token), token)


def increment_command(name: str) -> bytes:
    """`ma` of the counter of `name`, creating it from the clock when it is missing.

    A counter is an item, so an eviction or a restart can lose it. `N0 J<seed>`
    makes the server create a missing one, atomically, holding the current Unix
    time in microseconds rather than 1, which keeps tokens above every token handed
    out before the loss, as long as fewer than a million fenced acquisitions a
    second were made on the name and the seeding node's clock is not behind by
    more than the counter's age. Nodes racing to create it get one seed, then
    increments. `N0`: the counter never expires.
    """
    seed = time.time_ns() // 1000
    return b"ma %s N0 J%d v\r\n" % (fence_key(name).encode(), seed)


# -- reading replies -------------------------------------------------------------------------


def _added(reply: Reply) -> bool:
    if reply.status == STORED:
        return True
    if reply.status == NOT_STORED:
        return False
    raise unexpected(reply, "add")


def owned_cas(reply: Reply, owner: str) -> bytes | None:
    """The CAS value of the item read by `mg <key> v c` if it holds `owner`, else None.

    With CAS disabled (`-C`), every item's CAS value is 0 and `md <key> C0` deletes
    whatever the item holds by then: a blind delete. That is refused, so the lock
    expires at its TTL instead of freeing a newer holder.
    """
    if reply.status == MISS:
        return None
    if reply.status != VALUE:
        raise unexpected(reply, "meta get")
    if reply.value != owner.encode():
        return None
    for flag in reply.flags:
        if flag[:1] == b"c":
            cas = flag[1:]
            if cas == _CAS_DISABLED:
                raise MemcachedError(
                    "the memcached server runs with -C, which disables CAS: locks can be "
                    "neither released early nor renewed safely; restart it without -C"
                )
            return cas
    raise unexpected(reply, "meta get")


def incremented_value(reply: Reply) -> int:
    """The counter value in a reply to `ma ... v`: `VA <size>`, then the digits."""
    if reply.status != VALUE or reply.value is None or not reply.value.isdigit():
        raise unexpected(reply, "meta increment")
    return int(reply.value)
