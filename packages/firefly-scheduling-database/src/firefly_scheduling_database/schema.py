"""The two tables of the lease backend, and creating them idempotently.

`<table>` holds one row per held name: the per-acquisition owner token and the
lease instants, all written by the database's own clock. `<table>_fences` holds the
fencing counter of each name; it is a separate table because a lease row is deleted
on release, and the counter must keep increasing across holdings, forever.
`<table>_queue` holds the tickets of waiting acquisitions, a row per waiter that
expires on the database's clock (see `locks.ticket_queue_async`), so waiters of
every node are served in arrival order.

Names are compared exactly, byte for byte, on every dialect: PostgreSQL's column
uses the "C" collation, and MySQL/MariaDB's is a VARBINARY holding UTF-8, because
their default collations are case-insensitive and PAD SPACE ('a' = 'A' = 'a ').
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import BigInteger, Column, Connection, DateTime, MetaData, String, Table
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.schema import CreateTable

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.validation import MAX_LOCK_NAME_LENGTH

DEFAULT_TABLE = "firefly_scheduling_locks"
FENCES_SUFFIX = "_fences"
QUEUE_SUFFIX = "_queue"
# Unquoted-identifier shape, short enough that `<table>_fences` and `<table>_queue` fit PostgreSQL's
# 63-character identifier limit (MySQL allows 64).
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,55}")
# Every name is at most 255 characters, so at most 4 * 255 bytes of UTF-8.
_MAX_NAME_BYTES = 4 * MAX_LOCK_NAME_LENGTH


def _lock_name_type() -> String:
    return (
        String(MAX_LOCK_NAME_LENGTH)
        .with_variant(postgresql.VARCHAR(MAX_LOCK_NAME_LENGTH, collation="C"), "postgresql")
        .with_variant(mysql.VARBINARY(_MAX_NAME_BYTES), "mysql", "mariadb")
    )


def _instant_type() -> DateTime:
    # Microsecond precision everywhere; SQLite stores the text SQLAlchemy's DateTime reads.
    return DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


@dataclass(frozen=True)
class LeaseTables:
    """The lease table, its fence table and its waiters' queue, for one table name."""

    locks: Table
    fences: Table
    queue: Table

    @classmethod
    def named(cls, table: str) -> LeaseTables:
        """Describe the tables called `table` and `table + "_fences"`; refuse odd names."""
        if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
            raise ConfigurationError(
                f"the database lock provider needs a plain table name (letters, digits, "
                f"underscores, at most 56 characters), got {table!r}"
            )
        metadata = MetaData()
        locks = Table(
            table,
            metadata,
            Column("name", _lock_name_type(), primary_key=True),
            Column("locked_by", String(64), nullable=False),
            Column("locked_until", _instant_type(), nullable=False),
            Column("locked_at", _instant_type(), nullable=False),
        )
        fences = Table(
            table + FENCES_SUFFIX,
            metadata,
            Column("name", _lock_name_type(), primary_key=True),
            Column("value", BigInteger(), nullable=False),
        )
        queue = Table(
            table + QUEUE_SUFFIX,
            metadata,
            Column("name", _lock_name_type(), primary_key=True),
            Column("ticket", String(64), primary_key=True),
            Column("joined_at", _instant_type(), nullable=False),
            Column("expires_at", _instant_type(), nullable=False),
        )
        return cls(locks, fences, queue)

    @property
    def all(self) -> tuple[Table, Table, Table]:
        return (self.locks, self.fences, self.queue)


def create_if_absent(connection: Connection, table: Table) -> None:
    """`CREATE TABLE IF NOT EXISTS`; two nodes racing may still collide (see `install`)."""
    connection.execute(CreateTable(table, if_not_exists=True))
