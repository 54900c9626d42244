"""The run-history table: its shape, its column types, and telling an old shape apart.

Version 0.2.0 keys a record by `(lock_name, task, instant)`; 0.1.0 keyed it by
`(task, instant)` alone, so two deployments sharing the database adopted each
other's fires. A 0.1.0 table is refused (`OldHistoryTable`) until
`firefly-scheduling migrate --history` upgrades it (`migration`): the store
never writes into a table whose key would mix deployments.

Names compare exactly on every dialect: collation "C" on PostgreSQL; on MySQL and
MariaDB the task is `utf8mb4_bin` (as in 0.1.0) and the lock name a VARBINARY holding
UTF-8, because `utf8mb4_bin` still ignores trailing spaces and lock names may end
with one (the lease table stores them the same way). On MySQL and MariaDB the lock
name, the task, the node and the error text travel as hex digits the server decodes,
and text comes back as its UTF-8 bytes (`mysql_text`), whatever the session's
sql_mode and client character set.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.port import (
    MAX_REQUESTED_BY_LENGTH,
    MAX_TRIGGER_LENGTH,
    SCHEDULED,
)
from firefly_scheduling.locks.validation import MAX_LOCK_NAME_LENGTH
from firefly_scheduling.schedule.instants import as_utc
from firefly_scheduling_database.mysql_text import HexBoundLongText, HexBoundName, HexBoundText

DEFAULT_TABLE: Final = "firefly_scheduling_runs"
#: The key of a 0.2.0 table, in order.
KEY: Final = ("lock_name", "task", "instant")
#: The key of a 0.1.0 table.
OLD_KEY: Final = ("task", "instant")
#: The columns that keep what made each fire and who asked (`migration` adds them).
TRIGGER_COLUMN: Final = "trigger_kind"
REQUESTED_BY_COLUMN: Final = "requested_by"
TRIGGER_COLUMNS: Final = (TRIGGER_COLUMN, REQUESTED_BY_COLUMN)
#: The command that upgrades an old table (named in every refusal).
MIGRATE_COMMAND: Final = "firefly-scheduling migrate --history"
# Short enough that `<table>_by_state_ended` fits PostgreSQL's 63-character limit.
_TABLE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
_NAME_LENGTH: Final = 255


class OldHistoryTable(ConfigurationError):
    """The history table has the 0.1.0 shape (keyed by target alone): migrate it first."""


class UtcDateTime(sa.types.TypeDecorator[datetime]):
    """An aware UTC datetime stored naive, to the microsecond, on every dialect."""

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name in {"mysql", "mariadb"}:
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime(timezone=False))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class ExactLockName(HexBoundName):
    """A lock name compared byte for byte: VARBINARY (UTF-8) on MySQL/MariaDB.

    There it travels as hex digits the server decodes (`mysql_text`).
    """

    impl = sa.String(MAX_LOCK_NAME_LENGTH)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name in {"mysql", "mariadb"}:
            return dialect.type_descriptor(mysql.VARBINARY(4 * MAX_LOCK_NAME_LENGTH))
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.VARCHAR(MAX_LOCK_NAME_LENGTH, collation="C"))
        return dialect.type_descriptor(sa.String(MAX_LOCK_NAME_LENGTH))


class ExactTask(HexBoundText):
    """A task name compared exactly: collation "C" on PostgreSQL, `utf8mb4_bin` on MySQL.

    On MySQL/MariaDB it travels as hex digits and comes back as UTF-8 bytes (`mysql_text`).
    """

    impl = sa.String(_NAME_LENGTH)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name in {"mysql", "mariadb"}:
            return dialect.type_descriptor(
                mysql.VARCHAR(_NAME_LENGTH, charset="utf8mb4", collation="utf8mb4_bin")
            )
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.VARCHAR(_NAME_LENGTH, collation="C"))
        return dialect.type_descriptor(sa.String(_NAME_LENGTH))


def checked_table_name(name: object) -> str:
    """`name` if it is a plain table name; a `ConfigurationError` naming it otherwise."""
    if not isinstance(name, str) or not _TABLE_NAME.fullmatch(name):
        raise ConfigurationError(
            f"the database history store needs a plain table name (letters, digits, "
            f"underscores, at most 48 characters), got {name!r}"
        )
    return name


def runs_table(name: str = DEFAULT_TABLE, *, indexes: bool = True) -> sa.Table:
    """The history table called `name`; a `ConfigurationError` for an odd name.

    `lock_name` defaults to '' on the server only so that a 0.1.0 node still writing
    during a rolling upgrade is not refused; 0.2.0 always writes it, and no lock is
    named '' (lock names are validated non-empty), so those rows match no deployment.
    """
    name = checked_table_name(name)
    columns: list[sa.schema.SchemaItem] = [
        sa.Column("lock_name", ExactLockName(), primary_key=True, server_default=sa.text("''")),
        sa.Column("task", ExactTask(), primary_key=True),
        sa.Column("instant", UtcDateTime(), primary_key=True),
        sa.Column("node", HexBoundText(_NAME_LENGTH), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=True),
        sa.Column("ended_at", UtcDateTime(), nullable=True),
        sa.Column("error", HexBoundLongText(), nullable=True),
        sa.Column("token", sa.BigInteger(), nullable=True),
        # What made the fire (`RunRecord.trigger`); rows written before the column
        # existed read as scheduled, through the server default `migration` adds.
        sa.Column(
            "trigger_kind",
            sa.String(MAX_TRIGGER_LENGTH),
            nullable=False,
            server_default=sa.text(f"'{SCHEDULED}'"),
        ),
        # Who asked for the fire (an operator's trigger or backfill), or NULL.
        sa.Column(REQUESTED_BY_COLUMN, HexBoundText(MAX_REQUESTED_BY_LENGTH), nullable=True),
    ]
    if indexes:
        columns += [
            sa.Index(f"{name}_by_instant", "instant"),
            sa.Index(f"{name}_by_state_ended", "state", "ended_at"),
            # A fire's read of its task's running records (`unfinished`): without it,
            # that read scans every record of the task, so each fire costs more the
            # more records its task has (a catch-up of thousands of fires, a fast
            # task's day of records).
            sa.Index(f"{name}_running", "lock_name", "task", "state"),
        ]
    return sa.Table(name, sa.MetaData(), *columns)


def table_key(connection: Connection, name: str) -> tuple[str, ...] | None:
    """The primary-key columns of table `name`, in order; None when there is no such table."""
    inspector = sa.inspect(connection)
    if not inspector.has_table(name):
        return None
    return tuple(inspector.get_pk_constraint(name).get("constrained_columns") or ())


def refuse_unless_current(key: tuple[str, ...], *, table: str, where: str) -> None:
    """Raise `OldHistoryTable` (naming the table and the command) unless `key` is 0.2.0's."""
    if key == KEY:
        return
    shape = "0.1.0 shape, keyed by (task, instant)" if key == OLD_KEY else f"key {key!r}"
    raise OldHistoryTable(
        f"the run-history table {table!r} in {where} has the {shape}; this version keys "
        f"fires by (lock_name, task, instant) so that deployments sharing the database "
        f"never adopt each other's fires. Upgrade it once with `{MIGRATE_COMMAND} "
        f"--url <the history URL>` (docs: Operations, Run history), then start the nodes"
    )


def create_or_check(engine: Engine, table: sa.Table, *, where: str) -> None:
    """Create `table` if absent, then refuse it unless it has this version's key.

    A concurrent creator elsewhere is fine. The shape is checked here, once per
    store: a 0.1.0 table keyed by target alone would mix the fires of deployments
    (`OldHistoryTable`, naming `where` the table is).
    """
    try:
        table.metadata.create_all(engine, checkfirst=True)
    except DBAPIError:
        # Another node created it between our check and our CREATE.
        if not sa.inspect(engine).has_table(table.name):
            raise
    with engine.connect() as connection:
        key = table_key(connection, table.name) or ()
        refuse_unless_current(key, table=table.name, where=where)
        missing = [c for c in TRIGGER_COLUMNS if not has_column(connection, table.name, c)]
        if missing:
            raise OldHistoryTable(
                f"the run-history table {table.name!r} in {where} has no "
                f"{' or '.join(map(repr, missing))} column (what made each fire: scheduled, "
                f"manual, backfill, and who asked); add it once with `{MIGRATE_COMMAND} "
                f"--url <the history URL>` (existing rows read as {SCHEDULED!r}), then start "
                "the nodes"
            )


def has_column(connection: Connection, name: str, column: str) -> bool:
    """Whether table `name` has `column`."""
    return any(found["name"] == column for found in sa.inspect(connection).get_columns(name))
