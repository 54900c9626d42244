"""The SQL of `PgAdvisoryLock` and `AsyncPgAdvisoryLock`, and the key of a lock name.

No I/O here: both flavours send exactly these statements, so a node running the
synchronous lock and a node running the asyncio one take the same advisory keys and
write the same fence and claim rows, and exclude each other on every name.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Final

#: Counters behind fencing tokens: one row per lock name, created on first fenced use.
FENCE_TABLE: Final = "firefly_scheduling_fences"
#: Fire claims: one row per claimed fire, expiring by the server's clock, created on first use.
CLAIM_TABLE: Final = "firefly_scheduling_claims"

#: PostgreSQL 14 is the first server that can end an idle session (see `session_setup`).
_IDLE_SESSION_TIMEOUT_VERSION: Final = 140000

# Run once per new session. A statement_timeout already set by the role, the database or
# the URL's `options` is kept; only an unbounded one is bounded. The server-side TCP
# keepalives let the server end the session (and free its locks) about a minute after the
# node's host vanished, instead of the operating system's default of over two hours.
_SESSION_SETUP: Final = (
    "SELECT CASE WHEN current_setting('statement_timeout') = '0'"
    " THEN set_config('statement_timeout', '5s', false) END,"
    " set_config('tcp_keepalives_idle', '30', false),"
    " set_config('tcp_keepalives_interval', '10', false),"
    " set_config('tcp_keepalives_count', '3', false)"
)
# PostgreSQL 14+ may end idle sessions; a session that holds a lock idles by design.
_SESSION_SETUP_14: Final = _SESSION_SETUP + ", set_config('idle_session_timeout', '0', false)"

TRY_LOCK: Final = "SELECT pg_try_advisory_lock(%s)"
# Wait in the server's queue for the lock, at most `timeout` (a duration such as
# '250ms'): `lock_timeout` set for this statement alone (its implicit transaction, in
# autocommit), in a CTE evaluated before the lock is asked for. Past the timeout the
# server raises lock_not_available (55P03) and the session is left as it was.
WAIT_LOCK: Final = (
    "WITH setting AS MATERIALIZED (SELECT set_config('lock_timeout', %(timeout)s, true))"
    " SELECT pg_advisory_lock(%(key)s) FROM setting"
)
UNLOCK: Final = "SELECT pg_advisory_unlock(%s)"
# A bigint advisory key appears in pg_locks split into two unsigned 32-bit halves, with
# objsubid 1 (the two-int4 form uses 2, so it is a different lock).
HOLDS: Final = (
    "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
    " AND pid = pg_backend_pid() AND classid = %s::oid AND objid = %s::oid"
    " AND objsubid = 1 AND granted)"
)
# `UNLOCK` and `HOLDS` for several keys at once (a session's waiting releases and
# checks): a row per key, with the key's place in the batch, read by that place. The
# held locks of the session are read from pg_locks once, not once per key.
UNLOCK_MANY: Final = (
    "SELECT wanted.place, pg_advisory_unlock(wanted.key)"
    " FROM unnest(%(keys)s::bigint[]) WITH ORDINALITY AS wanted (key, place)"
)
HOLDS_MANY: Final = (
    "SELECT wanted.place, held.objid IS NOT NULL"
    " FROM unnest(%(high)s::bigint[], %(low)s::bigint[]) WITH ORDINALITY"
    " AS wanted (high, low, place)"
    " LEFT JOIN (SELECT classid, objid FROM pg_locks WHERE locktype = 'advisory'"
    " AND pid = pg_backend_pid() AND objsubid = 1 AND granted) AS held"
    " ON held.classid = wanted.high::oid AND held.objid = wanted.low::oid"
)
CREATE_FENCES: Final = (
    f"CREATE TABLE IF NOT EXISTS {FENCE_TABLE}"
    ' (name text COLLATE "C" PRIMARY KEY, value bigint NOT NULL)'
)
# The table name is the constant FENCE_TABLE, never input, so the f-strings are safe.
NEXT_FENCE: Final = (
    f"INSERT INTO {FENCE_TABLE} AS fence (name, value) VALUES (%s, 1)"  # noqa: S608 - constant
    " ON CONFLICT (name) DO UPDATE SET value = fence.value + 1 RETURNING fence.value"
)
# Lock and fence in one round trip: a row comes back only when the lock was won. The
# volatile function keeps the CTE from being inlined, so it runs exactly once.
TRY_LOCK_AND_FENCE: Final = (
    "WITH attempt AS (SELECT pg_try_advisory_lock(%(key)s) AS won)"  # noqa: S608 - constant
    f" INSERT INTO {FENCE_TABLE} AS fence (name, value)"
    " SELECT %(name)s, 1 FROM attempt WHERE attempt.won"
    " ON CONFLICT (name) DO UPDATE SET value = fence.value + 1 RETURNING fence.value"
)

# Several names at once (a resident host's task locks of the fires it won): the names
# that come back are the locks won, on this session.
TRY_LOCK_MANY: Final = (
    "SELECT wanted.name FROM unnest(%(names)s::text[], %(keys)s::bigint[])"
    " AS wanted (name, key) WHERE pg_try_advisory_lock(wanted.key)"
)
# TRY_LOCK_AND_FENCE for several names: a row per lock won, with its new fence value.
TRY_LOCK_AND_FENCE_MANY: Final = (
    "WITH attempt AS (SELECT wanted.name, pg_try_advisory_lock(wanted.key) AS won"  # noqa: S608
    " FROM unnest(%(names)s::text[], %(keys)s::bigint[]) AS wanted (name, key))"
    f" INSERT INTO {FENCE_TABLE} AS fence (name, value)"
    " SELECT attempt.name, 1 FROM attempt WHERE attempt.won"
    " ON CONFLICT (name) DO UPDATE SET value = fence.value + 1"
    " RETURNING fence.name, fence.value"
)

CREATE_CLAIMS: Final = (
    f"CREATE TABLE IF NOT EXISTS {CLAIM_TABLE}"
    ' (name text COLLATE "C" PRIMARY KEY, expires_at timestamptz NOT NULL)'
)
# One statement: a new row, or an expired row taken over; RETURNING yields a row only
# then. `now()` is the server's clock (the statement's transaction start, in autocommit).
CLAIM: Final = (
    f"INSERT INTO {CLAIM_TABLE} AS claim (name, expires_at)"  # noqa: S608 - constant
    " VALUES (%(name)s, now() + make_interval(secs => %(seconds)s))"
    " ON CONFLICT (name) DO UPDATE SET expires_at = EXCLUDED.expires_at"
    " WHERE claim.expires_at <= now() RETURNING 1"
)
# `CLAIM` for several distinct names in one statement (a resident host's batch): the
# names that come back are the claims won.
CLAIM_MANY: Final = (
    f"INSERT INTO {CLAIM_TABLE} AS claim (name, expires_at)"  # noqa: S608 - constant
    " SELECT wanted.name, now() + make_interval(secs => wanted.seconds)"
    " FROM unnest(%(names)s::text[], %(seconds)s::float8[]) AS wanted (name, seconds)"
    " ON CONFLICT (name) DO UPDATE SET expires_at = EXCLUDED.expires_at"
    " WHERE claim.expires_at <= now() RETURNING claim.name"
)
SWEEP_CLAIMS: Final = f"DELETE FROM {CLAIM_TABLE} WHERE expires_at <= now()"  # noqa: S608


def session_setup(server_version: int) -> str:
    """The statement that prepares a new session on a server of `server_version` (libpq's)."""
    return _SESSION_SETUP_14 if server_version >= _IDLE_SESSION_TIMEOUT_VERSION else _SESSION_SETUP


@functools.lru_cache(maxsize=1024)
def advisory_key(name: str) -> int:
    """The advisory-lock key of `name`: the PHP original's formula, in [-2**59, 2**59).

    Cached: a scheduler takes the same few names over and over.
    """
    try:
        encoded = name.encode()
    except UnicodeEncodeError as err:
        raise ValueError(f"lock name {name!r} cannot be encoded as UTF-8: {err}") from None
    return int(hashlib.sha256(encoded).hexdigest()[:15], 16) - 2**59


def wait_lock_parameters(key: int, seconds: float) -> dict[str, object]:
    """`WAIT_LOCK`'s parameters: the key, and the wait as whole milliseconds (at least 1;
    a lock_timeout of 0 would mean no timeout at all)."""
    return {"key": key, "timeout": f"{max(1, round(seconds * 1000))}ms"}


def holds_parameters(key: int) -> tuple[int, int]:
    """`HOLDS`'s parameters for `key`: its unsigned 32-bit halves, as pg_locks shows them."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    return unsigned >> 32, unsigned & 0xFFFF_FFFF


def holds_many_parameters(names: Sequence[str]) -> dict[str, object]:
    """`HOLDS_MANY`'s parameters: the halves of each name's key, in the names' order."""
    halves = [holds_parameters(advisory_key(name)) for name in names]
    return {"high": [high for high, _ in halves], "low": [low for _, low in halves]}


def unlock_many_parameters(names: Sequence[str]) -> dict[str, object]:
    """`UNLOCK_MANY`'s parameters: each name's key, in the names' order."""
    return {"keys": [advisory_key(name) for name in names]}


def by_place(rows: Sequence[tuple[int, bool]], count: int) -> list[bool]:
    """The answers of `HOLDS_MANY` or `UNLOCK_MANY`, in the order of the names sent."""
    answers = [False] * count
    for place, answer in rows:
        answers[place - 1] = bool(answer)
    return answers


def claim_parameters(name: str, seconds: float) -> dict[str, object]:
    """`CLAIM`'s parameters."""
    return {"name": name, "seconds": seconds}


def claim_many_parameters(claims: Sequence[tuple[str, float]]) -> dict[str, object]:
    """`CLAIM_MANY`'s parameters: the distinct names and their windows, as two arrays.

    In name order, whatever order they came in: the statement keeps each row it
    inserts locked until it ends, so two nodes' batches that took the same names in
    opposite orders would deadlock (and PostgreSQL would abort one of them, its
    fires unknown). In one order, one waits for the other. The answers are read by
    name (`RETURNING claim.name`), so the order is free.
    """
    ordered = sorted(claims)
    return {"names": [name for name, _ in ordered], "seconds": [seconds for _, seconds in ordered]}


def fenced_acquire_parameters(key: int, name: str) -> dict[str, object]:
    """`TRY_LOCK_AND_FENCE`'s parameters."""
    return {"key": key, "name": name}


def acquire_many_parameters(names: Sequence[str]) -> dict[str, object]:
    """`TRY_LOCK_MANY`'s and `TRY_LOCK_AND_FENCE_MANY`'s parameters: the distinct names,
    in name order (the fence rows are then written in one order by every node, as
    `claim_many_parameters` explains), and their advisory keys."""
    ordered = sorted(set(names))
    return {"names": ordered, "keys": [advisory_key(name) for name in ordered]}
