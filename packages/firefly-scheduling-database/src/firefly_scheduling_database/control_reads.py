"""The control store's reads of every second, straight on the pooled driver connection.

A resident host reads its control store all the time: the change mark once a second
(`hosts.runtime.change_mark`), and the pauses of every batch of fires it claims
(`fires.pausing`). Through SQLAlchemy's execution layer each such read on PostgreSQL
was three statements (`BEGIN`, the `SELECT`, `ROLLBACK`) and about 450 Python calls,
most of them the layer's own (a `Connection`, its autobegin, the statement's cache
key, result objects); here it is the `SELECT` alone and about 200 calls (counted on
an idle node: 504 calls a second before, 259 after). On a node that loses every fire
of 200 one-second tasks, the change mark alone was a few per cent of its CPU.
So the synchronous store sends these two reads as the run history sends its
per-fire statements (`sql_history.driver.DriverPath`): compiled once from the
store's SQLAlchemy statements, on a connection of the same pool, in autocommit for
the call. Each read is still a round trip: nothing is cached.

PostgreSQL only: MySQL's columns travel as hex digits (`mysql_text`) and SQLite is
a file; they, the writes and the asyncio store keep SQLAlchemy.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from firefly_scheduling.control.records import RecordKind
from firefly_scheduling_database.sql_history.driver import DriverPath, DriverStatement


class ControlReads:
    """The record-value reads of one control table, on the driver (see the module doc)."""

    def __init__(self, engine: Engine, table: sa.Table) -> None:
        self._path = DriverPath(engine)
        value = table.c.record_value
        kind = table.c.kind == sa.bindparam("kind")
        self._one = DriverStatement(
            sa.select(value).where(kind, table.c.record_key == sa.bindparam("record_key")),
            engine,
        )
        self._all = DriverStatement(sa.select(value).where(kind), engine)

    def value(self, kind: RecordKind, key: str) -> str | None:
        """The value of record (`kind`, `key`), or None where there is none."""
        rows = self._path.rows(self._one, {"kind": kind, "record_key": key})
        return None if not rows else str(rows[0]["record_value"])

    def values(self, kind: RecordKind) -> list[str]:
        """The values of every record of `kind`."""
        return [str(row["record_value"]) for row in self._path.rows(self._all, {"kind": kind})]


def control_reads(engine: Engine, table: sa.Table) -> ControlReads | None:
    """The driver reads of `table` on `engine`, where they apply (PostgreSQL); else None."""
    return ControlReads(engine, table) if engine.dialect.name == "postgresql" else None
