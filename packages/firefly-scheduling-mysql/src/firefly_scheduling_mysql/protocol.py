"""The SQL of `MySqlNamedLock` and `AsyncMySqlNamedLock`, and the server name of a lock.

No I/O here: both flavours send exactly these statements with these parameters, so
a node running the synchronous lock (PyMySQL) and a node running the asyncio one
(asyncmy) take the same server lock names and write the same fence and claim rows,
and exclude each other on every name. The server error numbers are the protocol's,
the same whichever driver reports them.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from typing import Final

from pymysql.constants import ER

from firefly_scheduling.locks.server_keys import ServerKeyScheme

#: Only these names are sent as they are: no case, no spaces, no characters a
#: collation could fold together, so distinct readable names are distinct server names.
SERVER_NAMES: Final = ServerKeyScheme(
    readable_prefix="",
    hashed_prefix="firefly:",
    max_length=64,
    readable=re.compile(r"[a-z0-9_.:/-]+"),
    digest="sha1",
)

#: Counters behind fencing tokens: one row per server name, created on first fenced use.
FENCE_TABLE: Final = "firefly_scheduling_fences"
#: Fire claims: one row per claimed fire (by server name), expiring by the server's UTC
#: clock (UTC_TIMESTAMP, so no session time zone can shift it), created on first use.
CLAIM_TABLE: Final = "firefly_scheduling_claims"

#: Oldest servers whose session can hold several named locks at once. MySQL 5.6 and
#: older silently release a session's lock when it takes another one.
MINIMUM_VERSION: Final = (5, 7)

#: Server errors meaning "this server lacks the feature": a parse error or an unknown
#: function (a MySQL look-alike), or "not supported yet" (MariaDB Galera with wsrep_on).
UNSUPPORTED_ERRORS: Final = frozenset(
    {ER.PARSE_ERROR, ER.SYNTAX_ERROR, ER.SP_DOES_NOT_EXIST, ER.NOT_SUPPORTED_YET}
)
#: The server's "table does not exist": the fence or claim table is created on first use.
NO_SUCH_TABLE: Final = ER.NO_SUCH_TABLE
#: The protocol version of a MySQL greeting: every MySQL and MariaDB since 3.21.
PROTOCOL_VERSION: Final = 10

PROBE: Final = "SELECT VERSION(), IS_USED_LOCK(%s)"
PROBE_NAME: Final = "firefly:probe"
# A session that holds a lock idles by design; the default wait_timeout (8 h) would
# end it and free the lock. 31536000 s is the largest value the server accepts.
SESSION_SETUP: Final = "SET SESSION wait_timeout = 31536000"
GET_LOCK: Final = "SELECT GET_LOCK(%s, 0)"
# Wait in the server's queue up to %s seconds (fractional): 1 won, 0 timed out.
WAIT_LOCK: Final = "SELECT GET_LOCK(%s, %s)"
RELEASE_LOCK: Final = "SELECT RELEASE_LOCK(%s)"
HOLDS: Final = "SELECT IS_USED_LOCK(%s) = CONNECTION_ID()"
# VARBINARY compares bytes: no collation can merge two server names.
CREATE_FENCES: Final = (
    f"CREATE TABLE IF NOT EXISTS {FENCE_TABLE}"
    " (name VARBINARY(64) NOT NULL PRIMARY KEY, value BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"
)
# LAST_INSERT_ID(expr) puts the new value in the OK packet (cursor.lastrowid), so one
# round trip both increments and reads it. The table name is a constant, never input.
NEXT_FENCE: Final = (
    f"INSERT INTO {FENCE_TABLE} (name, value) VALUES (%s, LAST_INSERT_ID(1))"  # noqa: S608 - constant
    " ON DUPLICATE KEY UPDATE value = LAST_INSERT_ID(value + 1)"
)
# Lock and fence in one statement, so one round trip: the row is written (and the OK
# packet carries the new value) only when GET_LOCK won. A missing table is reported
# when the statement opens its tables, before GET_LOCK runs, so no lock is taken then.
GET_LOCK_AND_FENCE: Final = (
    f"INSERT INTO {FENCE_TABLE} (name, value)"  # noqa: S608 - constant
    " SELECT %(name)s, LAST_INSERT_ID(1) FROM DUAL WHERE GET_LOCK(%(name)s, 0) = 1"
    " ON DUPLICATE KEY UPDATE value = LAST_INSERT_ID(value + 1)"
)
LAST_FENCE: Final = "SELECT LAST_INSERT_ID()"

CREATE_CLAIMS: Final = (
    f"CREATE TABLE IF NOT EXISTS {CLAIM_TABLE}"
    " (name VARBINARY(64) NOT NULL PRIMARY KEY, expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB"
)
# One statement. Affected rows: 1 inserted, 2 an expired row taken over, 0 a live row
# left alone (neither driver sets CLIENT_FOUND_ROWS, which would count it as 1).
CLAIM: Final = (
    f"INSERT INTO {CLAIM_TABLE} (name, expires_at)"  # noqa: S608 - constant
    " VALUES (%(name)s, UTC_TIMESTAMP(6) + INTERVAL %(micros)s MICROSECOND)"
    " ON DUPLICATE KEY UPDATE expires_at = IF(expires_at <= UTC_TIMESTAMP(6),"
    " UTC_TIMESTAMP(6) + INTERVAL %(micros)s MICROSECOND, expires_at)"
)
#: Affected-row counts of `CLAIM` that mean the claim was won.
CLAIM_WON: Final = frozenset({1, 2})
SWEEP_CLAIMS: Final = f"DELETE FROM {CLAIM_TABLE} WHERE expires_at <= UTC_TIMESTAMP(6) LIMIT 10000"  # noqa: S608
_VERSION: Final = re.compile(r"(\d+)\.(\d+)")


@functools.lru_cache(maxsize=4096)
def server_name(name: str) -> str:
    """The server lock name of an already validated lock name (see `SERVER_NAMES`).

    Cached: a scheduler asks for the same few names every cycle, and a cache hit
    skips the pattern match and the hash.
    """
    return SERVER_NAMES.key(name)


def fenced_acquire_parameters(name: str) -> dict[str, str]:
    """`GET_LOCK_AND_FENCE`'s parameters for lock `name`."""
    return {"name": server_name(name)}


def acquire_many(names: Sequence[str], *, fenced: bool) -> tuple[str, list[str]]:
    """One statement taking the server locks of several (distinct, validated) names.

    Unfenced, `GET_LOCK(name, 0)` per name in one `answers_in_one_column` (read
    them with `answers`). Fenced, `GET_LOCK_AND_FENCE` over a derived table of the names: the
    counter of each name won is written in the same statement, and `held_fences`
    (with the same server names) reads the tokens back: the OK packet carries only
    one `LAST_INSERT_ID`. A name is counted only where its `GET_LOCK` returned 1, so
    only this session writes those rows until it releases them: the values it reads
    are its own tokens.
    """
    servers = [server_name(name) for name in names]
    if not fenced:
        return answers_in_one_column("GET_LOCK(%s, 0)", len(servers)), servers
    batch = " UNION ALL ".join(["SELECT %s AS name"] * len(servers))
    statement = (
        f"INSERT INTO {FENCE_TABLE} (name, value)"  # noqa: S608 - constant table, placeholders
        f" SELECT batch.name, 1 FROM ({batch}) AS batch WHERE GET_LOCK(batch.name, 0) = 1"
        " ON DUPLICATE KEY UPDATE value = value + 1"
    )
    return statement, servers


def holds_many(count: int) -> str:
    """`HOLDS` for `count` server names, in one `answers_in_one_column`."""
    return answers_in_one_column("IS_USED_LOCK(%s) = CONNECTION_ID()", count)


def release_many(count: int) -> str:
    """`RELEASE_LOCK` for `count` server names, in one `answers_in_one_column`.

    Each answer is 1 (released), 0 (held by another session) or NULL (not held: ours
    was lost), as `RELEASE_LOCK` answers alone.
    """
    return answers_in_one_column("RELEASE_LOCK(%s)", count)


#: The digit standing for a NULL answer in `answers_in_one_column`.
_NULL_DIGIT: Final = "2"


def answers_in_one_column(expression: str, count: int) -> str:
    """`expression` (1, 0 or NULL, one placeholder) for `count` names: one row, one column.

    The column is a string of one digit per name, in order: `1`, `0`, or `2` for NULL.
    A column per name made the driver parse a field descriptor per name, a Python
    object each: 7 % of a winning MySQL node's CPU went to the descriptors of its
    releases and checks. No argument of the `CONCAT` is NULL (`IFNULL`), so
    the server evaluates every one: a NULL argument would end the `CONCAT` there and
    skip the locks after it.
    """
    return "SELECT CONCAT(" + ", ".join([f"IFNULL({expression}, {_NULL_DIGIT})"] * count) + ")"


def answers(column: object) -> list[bool]:
    """The answers of an `answers_in_one_column` statement: True where one was 1.

    The column is text or, where the server types it binary, bytes.
    """
    text = bytes(column).decode("ascii") if isinstance(column, bytes | bytearray) else str(column)
    return [digit == "1" for digit in text]


def held_fences(count: int) -> str:
    """The fence counters of those of `count` server names this session holds.

    Its rows are `(server name, value)`; its parameters the server names that
    `acquire_many` sent.
    """
    return (
        f"SELECT name, value FROM {FENCE_TABLE}"  # noqa: S608 - constant table, placeholders
        f" WHERE name IN ({', '.join(['%s'] * count)})"
        " AND IS_USED_LOCK(name) = CONNECTION_ID()"
    )


#: Sent before the claims of a batch: one transaction, without gap locks (`claim_many`).
CLAIMS_BEGIN: Final = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION"
#: Results the batch's text answers before its first claim (`CLAIMS_BEGIN`'s two).
CLAIMS_PREAMBLE_RESULTS: Final = 2


def claim_many(
    claims: Sequence[tuple[str, float]],
) -> tuple[str, dict[str, object], list[int]]:
    """`CLAIM` once per claim in one transaction, as one multi-statement text.

    Returns the text, its parameters, and for each `CLAIM` in the text the index of
    its claim in `claims`. Each claim has its own affected-row count, read result by
    result after `CLAIMS_PREAMBLE_RESULTS`; the text ends with `COMMIT`.

    One transaction, not one per claim: InnoDB flushes its log at every commit, and
    100 claims in autocommit took 18 ms against 4 ms in one (on MariaDB). Its
    row locks last until the `COMMIT`, which the server runs with the rest of the
    text, without waiting for the client. The claims go in server-name order, the
    order of the table's key, so two nodes claiming the same fires lock their rows
    in one order and wait for each other instead of deadlocking; READ COMMITTED
    leaves out the gap locks that a sweep's range scan would cross.
    """
    order = sorted(range(len(claims)), key=lambda index: server_name(claims[index][0]).encode())
    statements: list[str] = [CLAIMS_BEGIN]
    parameters: dict[str, object] = {}
    for place, index in enumerate(order):
        name, seconds = claims[index]
        statements.append(
            CLAIM.replace("%(name)s", f"%(name_{place})s").replace(
                "%(micros)s", f"%(micros_{place})s"
            )
        )
        claim = claim_parameters(name, seconds)
        parameters |= {f"name_{place}": claim["name"], f"micros_{place}": claim["micros"]}
    statements.append("COMMIT")
    return "; ".join(statements), parameters, order


def claim_parameters(name: str, seconds: float) -> dict[str, object]:
    """`CLAIM`'s parameters: the server name, and the TTL in whole microseconds, rounded up."""
    return {"name": server_name(name), "micros": math.ceil(seconds * 1_000_000)}


def unsupported_version(version: str) -> str | None:
    """Why a server reporting `VERSION() = version` cannot serve, or None if it can.

    MariaDB reports 10.0 or later and qualifies. MySQL must be 5.7 or later: older
    sessions hold at most one named lock, and taking a second silently frees the first.
    """
    match = _VERSION.match(version)
    if match is None:
        return f"it reports version {version!r}, which is not a MySQL or MariaDB version"
    if (int(match[1]), int(match[2])) < MINIMUM_VERSION:
        return f"version {version} holds at most one named lock per session"
    return None
