"""The lease statements each supported dialect speaks, and how to read its errors.

Every instant is taken from the database's clock inside the statement itself, so
the clocks of the nodes never matter, and each operation is ONE statement:

* acquire: an upsert that inserts a free name or takes over an expired lease only;
  the rowcount says whether this owner won;
* release: a delete of the row only while it carries this acquisition's token
  (releases that wait for one another go together, see `dialect_batches`);
* renew: an update of this owner's still-valid lease;
* fence: an increment-and-return of the name's counter;
* fenced acquire: the lease and the fence in ONE statement where the dialect can
  write two tables in one (PostgreSQL: a data-modifying CTE); elsewhere the acquire,
  then a fence that increments only while the lease is still this owner's
  (`fence_held`), which needs no transaction around the two to order tokens as
  holdings are ordered;
* purge: a delete of expired leases (claims are never released, only expire);
* acquire many: several acquisitions in a few statements (`dialect_batches`).

Statements are rendered once per lock, for its table names (see `Statement`). A
statement reads the name as `{name}`: the parameter itself on PostgreSQL and SQLite,
whose drivers bind values outside the SQL text, and `UNHEX(:name)` on MySQL/MariaDB,
whose drivers write values into it (`LeaseSql.key`, `mysql_text`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Protocol

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_database.mysql_text import checked_inert, hex_text
from firefly_scheduling_database.schema import LeaseTables

#: The oldest SQLite with both upsert (3.24) and RETURNING (3.35).
MIN_SQLITE_VERSION = (3, 35, 0)


class StatementResult(Protocol):
    """What the lock reads back: a DBAPI cursor and SQLAlchemy's `CursorResult` both fit."""

    @property
    def rowcount(self) -> int: ...

    @property
    def lastrowid(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Sequence[Any]: ...


@dataclass(frozen=True)
class Statement:
    """One statement, as a `text()` clause and as SQL in the driver's own paramstyle.

    The clause runs through SQLAlchemy's execution layer (an application's Engine or
    Connection, whose event listeners then see it); the driver form goes straight to a
    pooled DBAPI cursor, without that layer's per-call cost.

    A MySQL text may hold several statements (`statements`), sent in one round trip
    on the lock's own connections, which allow them; each answers with a result of
    its own, read one after another (`dialect_batches`: a group of releases). Its
    values must be `inert` in any SQL text (hex digits, tokens, numbers), and are
    checked before they are sent.
    """

    clause: TextClause
    driver_sql: str
    #: Parameter names in order, for a positional paramstyle (SQLite's `?`).
    positions: tuple[str, ...] | None
    #: How many statements the text holds, each answering with its own result.
    statements: int = 1

    @classmethod
    def render(cls, sql: str, dialect: Dialect, *, statements: int = 1) -> Statement:
        clause = text(sql)
        compiled = clause.compile(dialect=dialect)
        positions = tuple(compiled.positiontup or ()) if compiled.positional else None
        return cls(clause, compiled.string, positions, statements)

    def driver_parameters(
        self, parameters: Mapping[str, object]
    ) -> Sequence[object] | Mapping[str, object]:
        """`parameters` in the driver's paramstyle; for a text of several statements,
        checked `inert` first (`mysql_text.checked_inert`)."""
        if self.statements > 1:
            checked_inert(parameters)
        if self.positions is None:
            return parameters
        return tuple(parameters[name] for name in self.positions)


class LeaseSql(ABC):
    """The statements of one dialect, bound to one pair of tables."""

    dialect_names: ClassVar[tuple[str, ...]]
    acquire_sql: ClassVar[str]
    release_sql: ClassVar[str] = "DELETE FROM {locks} WHERE name = {name} AND locked_by = :owner"
    renew_sql: ClassVar[str]
    fence_sql: ClassVar[str] = (
        "INSERT INTO {fences} (name, value) VALUES ({name}, 1) "
        "ON CONFLICT (name) DO UPDATE SET value = {fences}.value + 1 RETURNING value"
    )
    holder_sql: ClassVar[str] = "SELECT locked_by FROM {locks} WHERE name = {name}"
    #: Lease and fence in one statement returning the token, or None where impossible.
    acquire_fenced_sql: ClassVar[str | None] = None
    #: Increment the counter only while `:owner` holds an unexpired lease on `:name`;
    #: for the dialects without `acquire_fenced_sql`.
    fence_held_sql: ClassVar[str | None] = None
    purge_sql: ClassVar[str]
    #: How a statement reads the bound name (`{name}`): the parameter itself, or the
    #: server's decoding of it (MySQL, see `key`).
    bound_name: ClassVar[str] = ":name"
    #: Further `{placeholders}` the dialect's statements use.
    fragments: ClassVar[dict[str, str]] = {}

    def __init__(self, dialect: Dialect, tables: LeaseTables) -> None:
        preparer = dialect.identifier_preparer
        names = {
            "locks": preparer.format_table(tables.locks),
            "fences": preparer.format_table(tables.fences),
            "name": self.bound_name,
            **self.fragments,
        }
        self.acquire = Statement.render(self.acquire_sql.format(**names), dialect)
        self.release = Statement.render(self.release_sql.format(**names), dialect)
        self.renew = Statement.render(self.renew_sql.format(**names), dialect)
        self.fence = Statement.render(self.fence_sql.format(**names), dialect)
        self.holder = Statement.render(self.holder_sql.format(**names), dialect)
        self.acquire_fenced = (
            None
            if self.acquire_fenced_sql is None
            else Statement.render(self.acquire_fenced_sql.format(**names), dialect)
        )
        self.fence_held = (
            None
            if self.fence_held_sql is None
            else Statement.render(self.fence_held_sql.format(**names), dialect)
        )
        self.purge = Statement.render(self.purge_sql.format(**names), dialect)

    def key(self, name: str) -> str:
        """The value bound for the `name` column (`{name}` in a statement)."""
        return name

    @abstractmethod
    def ttl(self, ttl_seconds: float) -> Any:
        """The value bound for `:ttl`, in the unit the dialect's date arithmetic wants."""

    def acquired(self, rowcount: int, driver_connection: object) -> bool | None:
        """Whether the acquire upsert won, or None when its rowcount cannot tell."""
        return rowcount == 1

    def fence_value(self, result: StatementResult) -> int:
        """The counter value the fence statement produced."""
        return int(result.fetchone()[0])

    def fenced_value(self, result: StatementResult) -> int | None:
        """The token a conditional fence (`acquire_fenced`, `fence_held`) produced, if any."""
        row = result.fetchone()
        return None if row is None else int(row[0])

    @abstractmethod
    def is_contention(self, err: DBAPIError) -> bool:
        """Whether `err` means another transaction held or raced for the row (a lost race)."""

    @abstractmethod
    def is_missing_table(self, err: DBAPIError) -> bool:
        """Whether `err` means the lease tables have not been created."""


class PostgresLeaseSql(LeaseSql):
    """PostgreSQL: `ON CONFLICT ... DO UPDATE ... WHERE`, on `clock_timestamp()`.

    `now()` is frozen at the start of the transaction, which may be long before the
    statement when the caller's own transaction is used; `clock_timestamp()` is the
    real time, read once per statement through the `db_now` subquery.
    """

    dialect_names = ("postgresql",)
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


_DIALECTS: tuple[type[LeaseSql], ...] = (PostgresLeaseSql, MySqlLeaseSql, SqliteLeaseSql)


def lease_sql_for(dialect: Dialect, tables: LeaseTables) -> LeaseSql:
    """The statements for `dialect`, or a `ConfigurationError` for an unsupported one."""
    for dialect_sql in _DIALECTS:
        if dialect.name in dialect_sql.dialect_names:
            return dialect_sql(dialect, tables)
    supported = ", ".join(name for sql in _DIALECTS for name in sql.dialect_names)
    raise ConfigurationError(
        f"the database lock provider does not support the {dialect.name!r} dialect; "
        f"supported: {supported}"
    )


def _sqlstate(err: DBAPIError) -> str | None:
    # psycopg 3 calls it `sqlstate`, psycopg2 `pgcode`.
    code = getattr(err.orig, "sqlstate", None) or getattr(err.orig, "pgcode", None)
    return code if isinstance(code, str) else None


def _mysql_code(err: DBAPIError) -> int | None:
    args = getattr(err.orig, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)
