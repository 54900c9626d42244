"""MySQL/MariaDB's lease statements: `ON DUPLICATE KEY UPDATE` on `UTC_TIMESTAMP(6)`.

A batch is a multi-row upsert (whose row count cannot say which names won), then
the holders of the names read back: a name is won where its row carries this
request's owner token, unique per acquisition. Fenced, the counters of the names
won are incremented while their leases are still ours (`fence_held`'s rule), then
read back: only a holder increments a counter, so those values are our tokens.

Releases that wait for one another go together, each with its own answer. MySQL has
no `DELETE ... RETURNING`, so a group is ONE text of several statements, an
owner-checked DELETE per lease, each answered by its own affected-row count
(`releases_counted`), inside one transaction.

A key is the hex digits of the name's bytes, decoded by the server (`UNHEX`), and
the names a reply lists come back as `HEX(name)`: the same digits, so replies match
requests by equality.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import ClassVar

from sqlalchemy.exc import DBAPIError

from firefly_scheduling_database.mysql_text import hex_text
from firefly_scheduling_database.protocol.dialect import (
    Bound,
    LeaseBatches,
    LeaseSql,
    Request,
    decoded_placeholders,
    in_name_order,
    numbered,
    pairs,
    placeholders,
    sort_key,
)
from firefly_scheduling_database.protocol.statement import Statement, StatementResult


class MySqlLeaseSql(LeaseSql):
    """MySQL/MariaDB: `INSERT ... ON DUPLICATE KEY UPDATE` on `UTC_TIMESTAMP(6)`.

    The assignments run left to right and each sees the columns already assigned,
    so `locked_until` is assigned last: the others still test the old lease.
    `UTC_TIMESTAMP(6)` is constant within a statement and ignores the session zone.

    Rowcount: 1 = inserted, 2 = an expired lease taken over, 0 = unchanged (held).
    SQLAlchemy connects with CLIENT_FOUND_ROWS, which reports an unchanged row as 1
    too; engines built by this package switch it off, and on any other connection an
    ambiguous 1 is settled by reading the row back inside the same transaction.
    """

    dialect_names = ("mysql", "mariadb")
    fragments: ClassVar[dict[str, str]] = {
        "now": "UTC_TIMESTAMP(6)",
        "later": "(UTC_TIMESTAMP(6) + INTERVAL :ttl MICROSECOND)",
    }
    acquire_sql = (
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) "
        "VALUES ({name}, :owner, UTC_TIMESTAMP(6) + INTERVAL :ttl MICROSECOND, UTC_TIMESTAMP(6)) "
        "ON DUPLICATE KEY UPDATE "
        "locked_by = IF(locked_until <= UTC_TIMESTAMP(6), :owner, locked_by), "
        "locked_at = IF(locked_until <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), locked_at), "
        "locked_until = IF(locked_until <= UTC_TIMESTAMP(6), "
        "UTC_TIMESTAMP(6) + INTERVAL :ttl MICROSECOND, locked_until)"
    )
    renew_sql = (
        "UPDATE {locks} SET locked_until = UTC_TIMESTAMP(6) + INTERVAL :ttl MICROSECOND "
        "WHERE name = {name} AND locked_by = :owner AND locked_until > UTC_TIMESTAMP(6)"
    )
    # LAST_INSERT_ID(expr) hands the new value back in the OK packet: no second query.
    fence_sql = (
        "INSERT INTO {fences} (name, value) VALUES ({name}, LAST_INSERT_ID(1)) "
        "ON DUPLICATE KEY UPDATE value = LAST_INSERT_ID(value + 1)"
    )
    # MySQL cannot write two tables in one statement (no data-modifying CTE), so a
    # fenced acquire is the acquire, then this. Reading the lease row takes a shared
    # lock on it (INSERT ... SELECT), so a takeover waits for the increment to end.
    fence_held_sql = (
        "INSERT INTO {fences} (name, value) "
        "SELECT held.name, LAST_INSERT_ID(1) FROM {locks} AS held WHERE held.name = {name} "
        "AND held.locked_by = :owner AND held.locked_until > UTC_TIMESTAMP(6) "
        "ON DUPLICATE KEY UPDATE value = LAST_INSERT_ID({fences}.value + 1)"
    )
    purge_sql = "DELETE FROM {locks} WHERE locked_until <= UTC_TIMESTAMP(6)"
    bound_name = "UNHEX(:name)"
    #: The protocol's CLIENT_FOUND_ROWS capability bit.
    CLIENT_FOUND_ROWS = 2
    # ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK
    _contention = frozenset({1205, 1213})

    def key(self, name: str) -> str:
        """The name's UTF-8 bytes as hex digits, which the statements decode (`UNHEX`).

        The column holds the bytes; the digits are what travels in the SQL text, where
        no sql_mode and no client character set reads them otherwise (`mysql_text`).
        """
        return hex_text(name)

    def ttl(self, ttl_seconds: float) -> int:
        return max(1, math.ceil(Fraction(ttl_seconds) * 1_000_000))  # exact: never shorter

    def acquired(self, rowcount: int, driver_connection: object) -> bool | None:
        if rowcount != 1:
            return rowcount == 2
        return True if not self._counts_found_rows(driver_connection) else None

    def fence_value(self, result: StatementResult) -> int:
        return int(result.lastrowid)

    def fenced_value(self, result: StatementResult) -> int | None:
        # 1 = counter created, 2 = incremented, 0 = no lease of ours: nothing written.
        return int(result.lastrowid) if result.rowcount > 0 else None

    def is_contention(self, err: DBAPIError) -> bool:
        return _mysql_code(err) in self._contention

    def is_missing_table(self, err: DBAPIError) -> bool:
        return _mysql_code(err) == 1146  # ER_NO_SUCH_TABLE

    def _counts_found_rows(self, driver_connection: object) -> bool:
        # PyMySQL names them `client_flag`, asyncmy `_client_flag`.
        flags = getattr(driver_connection, "client_flag", None)
        if flags is None:
            flags = getattr(driver_connection, "_client_flag", None)
        # A driver that does not expose its flags is assumed to count found rows.
        return not isinstance(flags, int) or bool(flags & self.CLIENT_FOUND_ROWS)


class MySqlLeaseBatches(LeaseBatches):
    """A multi-row upsert, then reads (and fences) of what it won: 2 statements, 4 fenced.

    `VALUES(column)` is the row's would-be value, on MySQL and MariaDB alike (MySQL
    8.0.20 deprecates it for a row alias MariaDB lacks). As in the single upsert,
    `locked_until` is assigned last, so the other assignments still test the old lease.

    Releases: ONE text, `START TRANSACTION`, an owner-checked `DELETE` per lease in
    name order, `COMMIT`, sent in one round trip on the lock's own connections (which
    allow several statements, `engine.lock_engine`). Its values are hex digits and owner
    tokens only (checked, `Statement.driver_parameters`), so none of them can end a
    literal, whatever the session's sql_mode or character set. Each DELETE answers with its own
    affected-row count (1: deleted, 0: no longer this owner's), which MySQL's lack of
    `DELETE ... RETURNING` leaves as the only exact answer per lease. One transaction
    so that a text the server stops part way (a statement failed) deletes nothing:
    every caller of the group gets that error, as for a single release, and no lease
    is gone behind an error (the lock rolls the transaction back). It also makes the
    group one commit, not one per lease. Name order: two groups sharing rows lock them
    in the same order, so they wait for each other rather than deadlock.
    """

    dialect_names = ("mysql", "mariadb")
    names_in_reply = False
    answers_releases = True
    releases_counted = True
    #: A few hundred bytes of text per release (a name of up to 1,020 bytes goes as hex
    #: digits): a text stays within some 150 KB, far inside `max_allowed_packet`, and
    #: the renderings kept (one per group size met, `_sized`) stay few.
    most_releases = 64

    def acquire(self, requests: Sequence[Request], *, fenced: bool) -> Bound:
        ordered = sorted(requests, key=lambda request: sort_key(request[0]))
        parameters: dict[str, object] = {}
        for index, (key, owner, ttl) in enumerate(ordered):
            parameters |= {f"name_{index}": key, f"owner_{index}": owner, f"ttl_{index}": ttl}
        return self._statement("upsert", len(ordered)), parameters

    def holders(self, keys: Sequence[object]) -> Bound:
        return self._statement("holders", len(keys)), numbered("name", keys)

    def fence_held(self, held: Sequence[tuple[object, str]]) -> Bound:
        ordered = sorted(held, key=lambda pair: sort_key(pair[0]))
        parameters = numbered("name", [key for key, _ in ordered])
        parameters |= numbered("owner", [owner for _, owner in ordered])
        return self._statement("fence_held", len(ordered)), parameters

    def tokens(self, keys: Sequence[object]) -> Bound:
        return self._statement("tokens", len(keys)), numbered("name", keys)

    def release(self, held: Sequence[tuple[object, str]]) -> Bound:
        parameters = numbered("name", [key for key, _ in held])
        parameters |= numbered("owner", [owner for _, owner in held])
        return self._statement("release", len(held)), parameters

    def released(self, held: Sequence[tuple[object, str]]) -> Bound:
        ordered = in_name_order(held)
        statements = len(ordered) + _RELEASED_AROUND
        statement = self._sized(_MYSQL_TEXTS, "released", len(ordered), statements=statements)
        return statement, pairs(ordered)

    def deleted_by_counts(
        self, held: Sequence[tuple[object, str]], counts: Sequence[int]
    ) -> set[tuple[object, str]]:
        ordered = in_name_order(held)  # the order `released` wrote them in
        if len(counts) != len(ordered) + _RELEASED_AROUND:
            raise ValueError(
                f"a text of {len(ordered)} releases has {len(ordered) + _RELEASED_AROUND} "
                f"statements, got {len(counts)} row counts"
            )
        deletes = counts[_RELEASED_BEFORE : _RELEASED_BEFORE + len(ordered)]
        return {pair for pair, count in zip(ordered, deletes, strict=True) if count == 1}

    def _statement(self, kind: str, size: int) -> Statement:
        return self._sized(_MYSQL_TEXTS, kind, size)


def _mysql_upsert(size: int) -> str:
    rows = ", ".join(
        f"(UNHEX(:name_{i}), :owner_{i}, UTC_TIMESTAMP(6) + INTERVAL :ttl_{i} MICROSECOND, "
        "UTC_TIMESTAMP(6))"
        for i in range(size)
    )
    return (
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) VALUES "  # noqa: S608
        + rows
        + " ON DUPLICATE KEY UPDATE "
        "locked_by = IF(locked_until <= UTC_TIMESTAMP(6), VALUES(locked_by), locked_by), "
        "locked_at = IF(locked_until <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), locked_at), "
        "locked_until = IF(locked_until <= UTC_TIMESTAMP(6), VALUES(locked_until), locked_until)"
    )


def _mysql_holders(size: int) -> str:
    names = decoded_placeholders("name", size)
    return f"SELECT HEX(name), locked_by FROM {{locks}} WHERE name IN ({names})"  # noqa: S608


def _mysql_fence_held(size: int) -> str:
    return (
        "INSERT INTO {fences} (name, value) SELECT held.name, 1 FROM {locks} AS held "  # noqa: S608
        f"WHERE held.name IN ({decoded_placeholders('name', size)}) "
        f"AND held.locked_by IN ({placeholders('owner', size)}) "
        "AND held.locked_until > UTC_TIMESTAMP(6) ORDER BY held.name "
        "ON DUPLICATE KEY UPDATE value = {fences}.value + 1"
    )


def _mysql_tokens(size: int) -> str:
    names = decoded_placeholders("name", size)
    return f"SELECT HEX(name), value FROM {{fences}} WHERE name IN ({names})"  # noqa: S608


def _mysql_release(size: int) -> str:
    return (
        "DELETE FROM {locks} WHERE name IN "  # noqa: S608 - placeholders
        f"({decoded_placeholders('name', size)}) AND locked_by IN ({placeholders('owner', size)})"
    )


#: Statements of a release text before its DELETEs (START TRANSACTION), and around them.
_RELEASED_BEFORE = 1
_RELEASED_AROUND = 2


def _mysql_released(size: int) -> str:
    """`size` owner-checked DELETEs, one a lease, in one transaction: one text."""
    deletes = (
        f"DELETE FROM {{locks}} WHERE name = UNHEX(:name_{i}) AND locked_by = :owner_{i}"  # noqa: S608
        for i in range(size)
    )
    return "; ".join(["START TRANSACTION", *deletes, "COMMIT"])


_MYSQL_TEXTS: dict[str, Callable[[int], str]] = {
    "release": _mysql_release,
    "released": _mysql_released,
    "upsert": _mysql_upsert,
    "holders": _mysql_holders,
    "fence_held": _mysql_fence_held,
    "tokens": _mysql_tokens,
}


def _mysql_code(err: DBAPIError) -> int | None:
    args = getattr(err.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None
