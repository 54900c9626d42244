"""SQLite's lease statements: `ON CONFLICT` upserts on SQLite's `'now'`.

A batch is a multi-row upsert whose `RETURNING` lists the names won (SQLite returns
a row only where it inserted or updated one). Fenced, the counters of those names
are incremented while their leases are still ours, in a second statement whose
`RETURNING` gives the tokens. One writer holds the file at a time, and every
statement takes it (and, outside WAL, syncs the file) on its own, so a statement per
name would put a node's every fire behind the other nodes' writes. Releases that
wait for one another are deleted in ONE statement whose `RETURNING` lists the leases
it deleted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import ClassVar

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_database.protocol.dialect import (
    Bound,
    LeaseBatches,
    LeaseSql,
    Request,
    pairs,
    placeholders,
    sort_key,
)
from firefly_scheduling_database.schema import LeaseTables

#: The oldest SQLite with both upsert (3.24) and RETURNING (3.35).
MIN_SQLITE_VERSION = (3, 35, 0)


class SqliteLeaseSql(LeaseSql):
    """SQLite: `ON CONFLICT ... DO UPDATE ... WHERE` on SQLite's `'now'` (millisecond steps).

    'now' is the same for every call within one statement. Instants are stored as
    the text SQLAlchemy's DateTime uses ('YYYY-MM-DD HH:MM:SS.ffffff', UTC), so they
    compare correctly as text and read back as datetimes.
    """

    dialect_names = ("sqlite",)
    fragments: ClassVar[dict[str, str]] = {
        "now": "(strftime('%Y-%m-%d %H:%M:%f', 'now') || '000')",
        "later": "(strftime('%Y-%m-%d %H:%M:%f', 'now', :ttl) || '000')",
    }
    acquire_sql = (
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) "
        "VALUES ({name}, :owner, {later}, {now}) "
        "ON CONFLICT (name) DO UPDATE SET locked_by = excluded.locked_by, "
        "locked_until = excluded.locked_until, locked_at = excluded.locked_at "
        "WHERE {locks}.locked_until <= excluded.locked_at"
    )
    renew_sql = (
        "UPDATE {locks} SET locked_until = {later} "
        "WHERE name = {name} AND locked_by = :owner AND locked_until > {now}"
    )
    # No data-modifying CTE in SQLite: the acquire, then this (one writer at a time).
    fence_held_sql = (
        "INSERT INTO {fences} (name, value) "
        "SELECT held.name, 1 FROM {locks} AS held WHERE held.name = {name} "
        "AND held.locked_by = :owner AND held.locked_until > {now} "
        "ON CONFLICT (name) DO UPDATE SET value = {fences}.value + 1 RETURNING value"
    )
    purge_sql = "DELETE FROM {locks} WHERE locked_until <= {now}"

    def __init__(self, dialect: Dialect, tables: LeaseTables) -> None:
        version: tuple[int, ...] = getattr(dialect.dbapi, "sqlite_version_info", (0,))
        if version < MIN_SQLITE_VERSION:
            raise ConfigurationError(
                f"the database lock provider needs SQLite {_dotted(MIN_SQLITE_VERSION)} or "
                f"newer (upsert and RETURNING); this Python links SQLite {_dotted(version)}"
            )
        super().__init__(dialect, tables)

    def ttl(self, ttl_seconds: float) -> str:
        # SQLite's clock has millisecond steps: round up so a lease never gets shorter.
        milliseconds = math.ceil(Fraction(ttl_seconds) * 1000)
        return f"+{milliseconds // 1000}.{milliseconds % 1000:03d} seconds"

    def is_contention(self, err: DBAPIError) -> bool:
        # Never a lost race: SQLite takes each statement under the FILE's write lock, so
        # a race for a row shows as a row count of 0. SQLITE_BUSY ("database is locked")
        # means only that another writer held the file past the busy timeout, whatever
        # row it wrote: an error for this call, never "held elsewhere". Read as a lost
        # claim, a busy file on every node left a fire neither run nor recorded.
        return False

    def is_missing_table(self, err: DBAPIError) -> bool:
        return "no such table" in str(err.orig)


class SqliteLeaseBatches(LeaseBatches):
    """A multi-row upsert answering the names won: 1 statement, 2 fenced.

    Releases too: one delete, returning the leases it deleted. A pair of a batch is
    matched as a row value, `(name, locked_by) IN (VALUES ...)`, under `name IN (...)`
    so that SQLite searches the primary key rather than scanning the table. Instants
    are `SqliteLeaseSql`'s, from SQLite's `'now'`, the same for every row of a statement.
    """

    dialect_names = ("sqlite",)
    names_in_reply = True
    tokens_in_fence_reply = True
    answers_releases = True
    #: 3 placeholders a row: far inside SQLite's 32,766 (3.32 and newer).
    most_per_statement = 1000

    def acquire(self, requests: Sequence[Request], *, fenced: bool) -> Bound:
        ordered = sorted(requests, key=lambda request: sort_key(request[0]))
        parameters: dict[str, object] = {}
        for index, (key, owner, ttl) in enumerate(ordered):
            parameters |= {f"name_{index}": key, f"owner_{index}": owner, f"ttl_{index}": ttl}
        return self._sized(_SQLITE_TEXTS, "upsert", len(ordered)), parameters

    def fence_held(self, held: Sequence[tuple[object, str]]) -> Bound:
        ordered = sorted(held, key=lambda pair: sort_key(pair[0]))
        return self._sized(_SQLITE_TEXTS, "fence_held", len(ordered)), pairs(ordered)

    def release(self, held: Sequence[tuple[object, str]]) -> Bound:
        return self.released(held)

    def released(self, held: Sequence[tuple[object, str]]) -> Bound:
        return self._sized(_SQLITE_TEXTS, "released", len(held)), pairs(held)


def _sqlite_upsert(size: int) -> str:
    now = SqliteLeaseSql.fragments["now"]
    rows = ", ".join(
        f"(:name_{i}, :owner_{i}, {SqliteLeaseSql.fragments['later'].replace(':ttl', f':ttl_{i}')}"
        f", {now})"
        for i in range(size)
    )
    return (
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) VALUES "  # noqa: S608
        + rows
        + " ON CONFLICT (name) DO UPDATE SET locked_by = excluded.locked_by, "
        "locked_until = excluded.locked_until, locked_at = excluded.locked_at "
        "WHERE {locks}.locked_until <= excluded.locked_at RETURNING name"
    )


def _sqlite_fence_held(size: int) -> str:
    # The WHERE clause also tells SQLite's parser that ON CONFLICT is not a join's ON.
    return (
        "INSERT INTO {fences} (name, value) SELECT held.name, 1 FROM {locks} AS held "  # noqa: S608
        f"WHERE {_sqlite_pair_match('held', size)} "
        f"AND held.locked_until > {SqliteLeaseSql.fragments['now']} ORDER BY held.name "
        "ON CONFLICT (name) DO UPDATE SET value = {fences}.value + 1 RETURNING name, value"
    )


def _sqlite_released(size: int) -> str:
    return (
        "DELETE FROM {locks} AS held WHERE "  # noqa: S608 - placeholders
        f"{_sqlite_pair_match('held', size)} RETURNING name, locked_by"
    )


def _sqlite_pair_match(table: str, size: int) -> str:
    """`table`'s rows whose `(name, locked_by)` is one of the pairs `:name_i, :owner_i`."""
    pairs = ", ".join(f"(:name_{i}, :owner_{i})" for i in range(size))
    return (
        f"{table}.name IN ({placeholders('name', size)}) "
        f"AND ({table}.name, {table}.locked_by) IN (VALUES {pairs})"
    )


_SQLITE_TEXTS: dict[str, Callable[[int], str]] = {
    "upsert": _sqlite_upsert,
    "fence_held": _sqlite_fence_held,
    "released": _sqlite_released,
}


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)
