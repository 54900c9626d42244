"""PostgreSQL's lease statements: `ON CONFLICT` upserts on `clock_timestamp()`.

A batch is ONE statement over arrays (`unnest`), a data-modifying CTE writing the
fences of the names won; its reply lists them, with their tokens. Releases that wait
for one another are deleted in ONE statement whose `RETURNING` lists the leases it
deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from firefly_scheduling_database.protocol.dialect import Bound, LeaseBatches, LeaseSql, Request
from firefly_scheduling_database.schema import LeaseTables


class PostgresLeaseSql(LeaseSql):
    """PostgreSQL: `ON CONFLICT ... DO UPDATE ... WHERE`, on `clock_timestamp()`.

    `now()` is frozen at the start of the transaction, which may be long before the
    statement when the caller's own transaction is used; `clock_timestamp()` is the
    real time, read once per statement through the `db_now` subquery.
    """

    dialect_names = ("postgresql",)
    fragments: ClassVar[dict[str, str]] = {
        "now": "clock_timestamp()",
        "later": "(clock_timestamp() + make_interval(secs => :ttl))",
    }
    acquire_sql = (
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) "
        "SELECT {name}, :owner, db_now.instant + make_interval(secs => :ttl), db_now.instant "
        "FROM (SELECT clock_timestamp() AS instant) AS db_now "
        "ON CONFLICT (name) DO UPDATE SET locked_by = excluded.locked_by, "
        "locked_until = excluded.locked_until, locked_at = excluded.locked_at "
        "WHERE {locks}.locked_until <= excluded.locked_at"
    )
    renew_sql = (
        "UPDATE {locks} SET locked_until = db_now.instant + make_interval(secs => :ttl) "
        "FROM (SELECT clock_timestamp() AS instant) AS db_now "
        "WHERE {locks}.name = {name} AND {locks}.locked_by = :owner "
        "AND {locks}.locked_until > db_now.instant"
    )
    # The acquire's upsert returns its row only when this owner won; the fence row is
    # written only for that row, so a refused attempt consumes no token.
    acquire_fenced_sql = (
        "WITH won AS ("
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) "
        "SELECT {name}, :owner, db_now.instant + make_interval(secs => :ttl), db_now.instant "
        "FROM (SELECT clock_timestamp() AS instant) AS db_now "
        "ON CONFLICT (name) DO UPDATE SET locked_by = excluded.locked_by, "
        "locked_until = excluded.locked_until, locked_at = excluded.locked_at "
        "WHERE {locks}.locked_until <= excluded.locked_at "
        "RETURNING name) "
        "INSERT INTO {fences} AS fence (name, value) SELECT won.name, 1 FROM won "
        "ON CONFLICT (name) DO UPDATE SET value = fence.value + 1 RETURNING fence.value"
    )
    purge_sql = "DELETE FROM {locks} WHERE locked_until <= clock_timestamp()"
    # serialization_failure, deadlock_detected, lock_not_available (lock_timeout)
    _contention = frozenset({"40001", "40P01", "55P03"})

    def ttl(self, ttl_seconds: float) -> float:
        return ttl_seconds

    def is_contention(self, err: DBAPIError) -> bool:
        return _sqlstate(err) in self._contention

    def is_missing_table(self, err: DBAPIError) -> bool:
        return _sqlstate(err) == "42P01"  # undefined_table


class PostgresLeaseBatches(LeaseBatches):
    """One statement: the upsert over arrays, and the fences of the rows it returned.

    Releases too: one delete over arrays, returning the leases it deleted.
    """

    dialect_names = ("postgresql",)
    one_statement = True
    names_in_reply = True
    answers_releases = True
    _acquire_sql = (
        "INSERT INTO {locks} (name, locked_by, locked_until, locked_at) "
        "SELECT batch.name, batch.owner, db_now.instant + make_interval(secs => batch.ttl), "
        "db_now.instant FROM unnest(CAST(:names AS text[]), CAST(:owners AS text[]), "
        "CAST(:ttls AS float8[])) AS batch (name, owner, ttl), "
        "(SELECT clock_timestamp() AS instant) AS db_now ORDER BY batch.name "
        "ON CONFLICT (name) DO UPDATE SET locked_by = excluded.locked_by, "
        "locked_until = excluded.locked_until, locked_at = excluded.locked_at "
        "WHERE {locks}.locked_until <= excluded.locked_at "
        "RETURNING name"
    )
    _acquire_fenced_sql = (
        "WITH won AS (" + _acquire_sql + ") "  # noqa: S608 - constant text
        "INSERT INTO {fences} AS fence (name, value) SELECT won.name, 1 FROM won "
        "ORDER BY won.name ON CONFLICT (name) DO UPDATE SET value = fence.value + 1 "
        "RETURNING fence.name, fence.value"
    )

    _released_sql = (
        "DELETE FROM {locks} AS held USING unnest(CAST(:names AS text[]), "
        "CAST(:owners AS text[])) AS batch (name, owner) "
        "WHERE held.name = batch.name AND held.locked_by = batch.owner "
        "RETURNING held.name, held.locked_by"
    )

    def __init__(self, dialect: Dialect, tables: LeaseTables) -> None:
        super().__init__(dialect, tables)
        self._statements = {
            False: self._render(self._acquire_sql),
            True: self._render(self._acquire_fenced_sql),
        }
        self._released = self._render(self._released_sql)

    def acquire(self, requests: Sequence[Request], *, fenced: bool) -> Bound:
        parameters: dict[str, object] = {
            "names": [key for key, _, _ in requests],
            "owners": [owner for _, owner, _ in requests],
            "ttls": [ttl for _, _, ttl in requests],
        }
        return self._statements[fenced], parameters

    def released(self, held: Sequence[tuple[object, str]]) -> Bound:
        parameters: dict[str, object] = {
            "names": [key for key, _ in held],
            "owners": [owner for _, owner in held],
        }
        return self._released, parameters


def _sqlstate(err: DBAPIError) -> str | None:
    # psycopg 3 calls it `sqlstate`, psycopg2 `pgcode`.
    code = getattr(err.orig, "sqlstate", None) or getattr(err.orig, "pgcode", None)
    return code if isinstance(code, str) else None
