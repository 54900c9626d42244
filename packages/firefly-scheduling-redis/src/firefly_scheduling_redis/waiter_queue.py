"""The Redis queue of a name's waiters, without I/O: its keys, scripts and commands.

Across processes a release's message wakes every waiter at once, and without an
order the first to answer wins. So the attempts of a waiting acquisition go through
`ACQUIRE_IN_TURN`, which takes a free name only when no ticket is queued or the
waiter's own is the first live one, and otherwise queues the waiter's ticket (once
per turn): waiters are served in the order their tickets arrived. A try (`wait=0`)
and the fire path never look at the queue.

**Keys.** Two sorted sets per name, beside the lock key and in its slot on a cluster:
the queue (`queue_key`: ticket -> arrival number, one more than the last ticket's) and
the tickets' deadlines (`deadlines_key`: ticket -> Unix milliseconds, on the server's
clock). Both expire with their last ticket.

**A dead waiter never blocks the queue.** Each attempt sets its ticket's deadline to
the longest its waiter may sleep before its next attempt (the pause the script
returns) plus `TICKET_GRACE_SECONDS`; every script first drops the tickets past their
deadline. A live waiter that misses its deadline (a stalled process) only loses its
place: it takes a new ticket, at the end, on its next attempt.

**Leaving.** A wait that ends without winning (timed out, cancelled, failed) removes
its ticket (`LEAVE_QUEUE`); when that ticket was first and the name is free, it
publishes on the name's release channel, so that the next waiter tries at once. A win
removes the ticket in the same script.
"""

from __future__ import annotations

from typing import Final

from firefly_scheduling_redis.protocol import (
    CLUSTER_TAG_PREFIX,
    Script,
    fence_key,
    lock_key,
    milliseconds,
    release_channel,
)

QUEUE_KEY_PREFIX: Final = "firefly:scheduling:queue:"
DEADLINES_KEY_PREFIX: Final = "firefly:scheduling:queue-deadlines:"
CLUSTER_QUEUE_SUFFIX: Final = "}:queue"
CLUSTER_DEADLINES_SUFFIX: Final = "}:queue-deadlines"

#: How long a ticket outlives the pause its waiter was told to take: the scheduling
#: delay a live waiter may suffer between waking and its next attempt. A crashed
#: waiter's ticket holds the queue at most this long past that pause.
TICKET_GRACE_SECONDS: Final = 2.0
#: The longest pause a script tells a waiter to take, when its own bound is longer.
LONGEST_PAUSE_SECONDS: Final = 3600.0

# Lua: the server's clock in milliseconds as `now`, and the tickets past their
# deadline dropped from both sets. KEYS[q] is the queue, KEYS[d] the deadlines.
_PURGE: Final = """
local clock = redis.call('time')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local lapsed = redis.call('zrangebyscore', KEYS[{d}], '-inf', now)
if #lapsed > 0 then
    redis.call('zrem', KEYS[{q}], unpack(lapsed))
    redis.call('zremrangebyscore', KEYS[{d}], '-inf', now)
end
"""

#: KEYS[1] lock key, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] deadlines (one slot
#: on a cluster); ARGV[1] owner token, ARGV[2] TTL in ms, ARGV[3] ticket, ARGV[4] the
#: longest pause in ms, ARGV[5] the ticket's grace in ms, ARGV[6] '1' when fenced.
#: Returns {1, token} when the lock was free and the queue empty or the ticket its
#: first live one: the lock is taken, the ticket removed, and token is the incremented
#: fence counter (0 unfenced). Else {0, pause}, with the ticket queued at the end
#: unless it was queued: the ms to sleep unless woken (the holder's lease left, or the
#: first ticket's deadline when the lock is free, at most ARGV[4]); the ticket's
#: deadline is then that plus ARGV[5]. Each outcome's first write is the one that
#: matters (`SET`, or the deadline), so a write refused (OOM) leaves no ticket without
#: a deadline.
ACQUIRE_IN_TURN: Final = Script(
    _PURGE.format(q=3, d=4)
    + """
local first = redis.call('zrange', KEYS[3], 0, 0)[1]
local left = redis.call('pttl', KEYS[1])
if left == -2 and (not first or first == ARGV[3]) then
    redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
    if first then
        redis.call('zrem', KEYS[3], ARGV[3])
        redis.call('zrem', KEYS[4], ARGV[3])
    end
    if ARGV[6] == '1' then
        return {1, redis.call('incr', KEYS[2])}
    end
    return {1, 0}
end
local pause = tonumber(ARGV[4])
if left == -2 then
    local due = redis.call('zscore', KEYS[4], first)
    if due then pause = math.min(pause, math.max(tonumber(due) - now, 1)) end
elseif left >= 0 then
    pause = math.min(pause, left)
end
redis.call('zadd', KEYS[4], now + pause + tonumber(ARGV[5]), ARGV[3])
if not redis.call('zscore', KEYS[3], ARGV[3]) then
    local last = redis.call('zrange', KEYS[3], -1, -1, 'WITHSCORES')
    local arrival = 1
    if last[2] then arrival = tonumber(last[2]) + 1 end
    redis.call('zadd', KEYS[3], arrival, ARGV[3])
end
local latest = tonumber(redis.call('zrange', KEYS[4], -1, -1, 'WITHSCORES')[2])
redis.call('pexpireat', KEYS[3], latest)
redis.call('pexpireat', KEYS[4], latest)
return {0, pause}
"""
)

#: KEYS[1] lock key, KEYS[2] queue, KEYS[3] deadlines; ARGV[1] ticket, ARGV[2] the
#: name's release channel. Removes the ticket; when it was the first live one, the
#: lock is free and others wait, publishes an empty message on ARGV[2] (protected, as
#: in `RELEASE`). Returns 1 when the ticket was queued, else 0.
LEAVE_QUEUE: Final = Script(
    _PURGE.format(q=2, d=3)
    + """
local first = redis.call('zrange', KEYS[2], 0, 0)[1]
local removed = redis.call('zrem', KEYS[2], ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if first == ARGV[1] and redis.call('exists', KEYS[1]) == 0
        and redis.call('zcard', KEYS[2]) > 0 then
    redis.pcall('publish', ARGV[2], '')
end
return removed
"""
)


def queue_key(name: str, *, cluster: bool) -> bytes:
    """The sorted set of the waiters' tickets of `name`, by arrival."""
    if cluster:
        return (CLUSTER_TAG_PREFIX + name + CLUSTER_QUEUE_SUFFIX).encode("utf-8")
    return (QUEUE_KEY_PREFIX + name).encode("utf-8")


def deadlines_key(name: str, *, cluster: bool) -> bytes:
    """The sorted set of the deadlines of the waiters' tickets of `name`."""
    if cluster:
        return (CLUSTER_TAG_PREFIX + name + CLUSTER_DEADLINES_SUFFIX).encode("utf-8")
    return (DEADLINES_KEY_PREFIX + name).encode("utf-8")


def acquire_in_turn_keys(name: str, *, cluster: bool) -> tuple[bytes, ...]:
    """The keys of `ACQUIRE_IN_TURN`, in its order."""
    return (
        lock_key(name, cluster=cluster),
        fence_key(name, cluster=cluster),
        queue_key(name, cluster=cluster),
        deadlines_key(name, cluster=cluster),
    )


def acquire_in_turn_args(
    owner: str, ttl_seconds: float, ticket: str, longest_pause_seconds: float, *, fenced: bool
) -> tuple[str | int, ...]:
    """The arguments of `ACQUIRE_IN_TURN`, in its order."""
    longest = min(longest_pause_seconds, LONGEST_PAUSE_SECONDS)
    return (
        owner,
        milliseconds(ttl_seconds),
        ticket,
        milliseconds(longest),
        milliseconds(TICKET_GRACE_SECONDS),
        "1" if fenced else "0",
    )


def leave_queue_keys(name: str, *, cluster: bool) -> tuple[bytes, ...]:
    """The keys of `LEAVE_QUEUE`, in its order."""
    return (
        lock_key(name, cluster=cluster),
        queue_key(name, cluster=cluster),
        deadlines_key(name, cluster=cluster),
    )


def leave_queue_args(name: str, ticket: str, *, cluster: bool) -> tuple[str | bytes, ...]:
    """The arguments of `LEAVE_QUEUE`, in its order."""
    return (ticket, release_channel(name, cluster=cluster))
