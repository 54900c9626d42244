"""The memcached queue of a name's waiters, without I/O: its keys and operations.

The queue's rules are the core's (`locks.ticket_queue_async`); this module is how
memcached keeps it, with no list, no scan and no watch, only items:

* **Numbers.** A waiter's ticket takes the next number of the name's counter
  (`ma` on `firefly:scheduling:queue-next:<name>`, created when missing from the
  clock in microseconds, like a fence counter, so a lost counter starts above the
  numbers it handed out), and is the item `queue-ticket:<name>:<number>` holding the
  ticket's token, with the ticket's expiry: memcached drops a dead waiter's ticket
  by itself.
* **First.** A ticket is first when no ticket item lives for any number from the
  name's floor (`queue-floor:<name>`) up to its own. The floor is raised to a
  waiter's number once that waiter found itself first, so every number below it
  is known dead; a lost floor, or one further back than `SCAN_LIMIT` numbers,
  limits the look to the last `SCAN_LIMIT` numbers (one write of that many `mg`).
* **Refreshing** is a meta get with a new TTL (`mg ... T`): a miss, or another
  token under the number, means the ticket lapsed.

Round trips: joining **2** (the number, the `add`), keeping a place **1**, checking
the queue **2** (the floor and the counter, then the tickets ahead), plus one to
raise the floor the first time a waiter finds itself first; leaving **1**.
"""

from __future__ import annotations

import re
import time
from typing import Final, NamedTuple

from firefly_scheduling.locks.server_keys import ServerKeyScheme
from firefly_scheduling_memcached.protocol import (
    Operation,
    Request,
    incremented_value,
    server_expiry,
)
from firefly_scheduling_memcached.replies import (
    DONE,
    META_NOT_FOUND,
    MISS,
    NOT_STORED,
    STORED,
    VALUE,
    MemcachedError,
    Reply,
    unexpected,
)

#: The most numbers a waiter looks back for a live ticket ahead of its own.
SCAN_LIMIT: Final = 64
#: How many times a join takes a new number when one is already in use (a counter
#: re-created with a seed below the numbers it had handed out).
JOIN_ATTEMPTS: Final = 3

_KEY_SAFE: Final = re.compile(r"[!-~]+")


def _scheme(kind: str) -> ServerKeyScheme:
    return ServerKeyScheme(
        readable_prefix=f"firefly:scheduling:queue-{kind}:",
        hashed_prefix=f"firefly:scheduling:queue-{kind}-sha256:",
        max_length=250,
        readable=_KEY_SAFE,
    )


COUNTER_KEYS: Final = _scheme("next")
FLOOR_KEYS: Final = _scheme("floor")
# The number is digits after the last ':', so `<name>:<number>` is one pair only.
TICKET_KEYS: Final = _scheme("ticket")


class Queued(NamedTuple):
    """A queued ticket: its token and its number."""

    ticket: str
    number: int


def counter_key(name: str) -> bytes:
    """The item whose increments number the tickets of `name`; it never expires."""
    return COUNTER_KEYS.key(name).encode()


def floor_key(name: str) -> bytes:
    """The item holding a number below which every ticket of `name` is dead."""
    return FLOOR_KEYS.key(name).encode()


def ticket_key(name: str, number: int) -> bytes:
    """The item of the ticket numbered `number` in `name`'s queue."""
    return TICKET_KEYS.key(f"{name}:{number}").encode()


def join(name: str, ticket: str, seconds: float) -> Operation[int]:
    """Queue `ticket` at the end, alive for `seconds`; return its number."""
    token = ticket.encode()
    for _ in range(JOIN_ATTEMPTS):
        seed = time.time_ns() // 1000
        (counted,) = yield Request(b"ma %s N0 J%d v\r\n" % (counter_key(name), seed), 1)
        number = incremented_value(counted)
        expire = server_expiry(seconds, time.time())
        key = ticket_key(name, number)
        (added,) = yield Request(b"add %s 0 %d %d\r\n%s\r\n" % (key, expire, len(token), token), 1)
        if added.status == STORED:
            return number
        if added.status != NOT_STORED:
            raise unexpected(added, "add")
    raise MemcachedError(
        f"memcached: {JOIN_ATTEMPTS} ticket numbers in a row were in use in the queue of "
        f"{name!r}; its counter was re-created below them (a node's clock far behind?)"
    )


def keep(name: str, number: int, ticket: str, seconds: float) -> Operation[bool]:
    """Give the ticket `seconds` more to live; False when it lapsed (or is another's)."""
    expire = server_expiry(seconds, time.time())
    (found,) = yield Request(b"mg %s v T%d\r\n" % (ticket_key(name, number), expire), 1)
    if found.status == MISS:
        return False
    if found.status != VALUE:
        raise unexpected(found, "meta get")
    return found.value == ticket.encode()


def first(name: str, number: int | None) -> Operation[bool]:
    """Whether no live ticket of `name` is ahead of `number` (None: none is queued)."""
    floor_reply, counter_reply = yield Request(
        b"mg %s v\r\nmg %s v\r\n" % (floor_key(name), counter_key(name)), 2
    )
    floor = _number(floor_reply)
    if number is None:
        last = _number(counter_reply)
        if last is None:
            return True  # no ticket was ever numbered
        end = last + 1
    else:
        end = number
    start = end - SCAN_LIMIT if floor is None else max(floor, end - SCAN_LIMIT)
    ahead = range(max(start, 0), end)
    if ahead:
        replies = yield Request(
            b"".join(b"mg %s v\r\n" % ticket_key(name, n) for n in ahead), len(ahead)
        )
        for reply in replies:
            if reply.status == VALUE:
                return False
            if reply.status != MISS:
                raise unexpected(reply, "meta get")
    if number is not None and (floor is None or floor < number):
        text = b"%d" % number
        command = b"set %s 0 0 %d\r\n%s\r\n" % (floor_key(name), len(text), text)
        (stored,) = yield Request(command, 1)
        if stored.status != STORED:
            raise unexpected(stored, "set")
    return True


def leave(name: str, number: int) -> Operation[None]:
    """Delete the ticket numbered `number` (gone already: nothing to do)."""
    (deleted,) = yield Request(b"md %s\r\n" % ticket_key(name, number), 1)
    if deleted.status not in (DONE, META_NOT_FOUND):
        raise unexpected(deleted, "meta delete")


def _number(reply: Reply) -> int | None:
    """The number an `mg ... v` read, or None on a miss."""
    if reply.status == MISS:
        return None
    if reply.status != VALUE or reply.value is None or not reply.value.isdigit():
        raise unexpected(reply, "meta get")
    return int(reply.value)
