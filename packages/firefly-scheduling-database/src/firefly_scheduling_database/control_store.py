# Generated from control_store_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`DatabaseControlStore`: control records as rows of one SQL table.

PostgreSQL, MySQL/MariaDB and SQLite, through SQLAlchemy (`control_table`). A pause
is an upsert, a trigger, backfill or schedule an INSERT that ignores a duplicate key
(`ON CONFLICT DO NOTHING` on PostgreSQL and SQLite, `INSERT IGNORE` on MySQL), a
resume or a take a `DELETE` whose row count is 1 for exactly one of any number of
racing transactions. Times are the server's clock on PostgreSQL and MySQL (one
`SELECT`), and this host's on SQLite, whose clock is this host's anyway.

The table is created by `install()` (which `firefly-scheduling migrate` runs), or
else on first use (`CREATE TABLE IF NOT EXISTS`) where the role may create tables.
Written once, for asyncio; `control_store.py` is generated from it by
`tools/async_to_sync.py`, and the two read and write the same rows.
"""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Final

import sqlalchemy as sa
from sqlalchemy import URL
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.schema import CreateTable

from firefly_scheduling.control.records import ControlStoreError, RecordKind
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling_database.control_reads import control_reads
from firefly_scheduling_database.control_table import DEFAULT_TABLE, control_table
from firefly_scheduling_database.engine import (
    release_store_engine,
    store_engine,
)
from firefly_scheduling_database.url import describe_url

_SERVER_CLOCK: Final[dict[str, str]] = {
    "postgresql": "SELECT EXTRACT(EPOCH FROM clock_timestamp())",
    "mysql": "SELECT UNIX_TIMESTAMP(NOW(6))",
    "mariadb": "SELECT UNIX_TIMESTAMP(NOW(6))",
}


class DatabaseControlStore(ControlStore):
    """Control records as rows, shared by every process that reaches the database.

    `url` is a URL the database lock accepts (bare `postgresql://` and `mysql://`
    included); `table` keeps two deployments sharing a database apart. The
    synchronous store shares the run history's and the anchors' engine, within the
    stores' share of the node's connection budget (`max_connections`); the asyncio
    store has an engine of that share of its own. Construction does not connect.
    """

    store_name = "database"
    driver_errors = (SQLAlchemyError, OSError)

    def __init__(self, url: str | URL, *, table: str = DEFAULT_TABLE) -> None:
        self.table = control_table(table)
        # The engine the run history and the anchors share: one stores' share.
        self._engine = store_engine(url)
        self._closed = False
        target, secrets = describe_url(url)
        super().__init__(target=target, secrets=secrets)
        self._dialect = self._engine.dialect.name
        #: The change mark's and the pauses' reads on the driver (`control_reads`): the
        #: synchronous store on PostgreSQL; None elsewhere, through SQLAlchemy.
        self._reads = control_reads(self._engine, self.table)
        self._table_ready = False
        self._table_mutex = threading.Lock()

    def install(self) -> None:
        """Create the table if absent; safe to run again, and on several nodes at once."""
        try:
            self._ensure_table()
        except self.driver_errors as err:
            raise ControlStoreError(
                f"database control store {self._target} could not create table "
                f"{self.table.name!r}: {type(err).__name__}"
            ) from err

    def _put(self, kind: RecordKind, key: str, value: str) -> None:
        self._ensure_table()
        row = {"kind": kind, "record_key": key, "record_value": value}
        statement: sa.Executable
        if self._dialect in {"mysql", "mariadb"}:
            insert = mysql.insert(self.table).values(row)
            statement = insert.on_duplicate_key_update(record_value=insert.inserted.record_value)
        else:
            dialect_insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
            upsert = dialect_insert(self.table).values(row)
            statement = upsert.on_conflict_do_update(
                index_elements=[self.table.c.kind, self.table.c.record_key],
                set_={"record_value": upsert.excluded.record_value},
            )
        with self._engine.begin() as connection:
            connection.execute(statement)

    def _add(self, kind: RecordKind, key: str, value: str) -> bool:
        self._ensure_table()
        row = {"kind": kind, "record_key": key, "record_value": value}
        with self._engine.begin() as connection:
            if self._dialect in {"mysql", "mariadb"}:
                ignore = mysql.insert(self.table).values(row).prefix_with("IGNORE")
                return (connection.execute(ignore)).rowcount == 1
            # RETURNING says whether the row was ours; psycopg's rowcount may be -1 here.
            dialect_insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
            statement = (
                dialect_insert(self.table)
                .values(row)
                .on_conflict_do_nothing()
                .returning(self.table.c.record_key)
            )
            return (connection.execute(statement)).first() is not None

    def _get(self, kind: RecordKind, key: str) -> str | None:
        self._ensure_table()
        if self._reads is not None:
            return self._reads.value(kind, key)
        query = sa.select(self.table.c.record_value).where(
            self.table.c.kind == kind, self.table.c.record_key == key
        )
        with self._engine.connect() as connection:
            value = (connection.execute(query)).scalar_one_or_none()
        return None if value is None else str(value)

    def _delete(self, kind: RecordKind, key: str) -> bool:
        self._ensure_table()
        statement = self.table.delete().where(
            self.table.c.kind == kind, self.table.c.record_key == key
        )
        with self._engine.begin() as connection:
            return (connection.execute(statement)).rowcount == 1

    def _values(self, kind: RecordKind) -> list[str]:
        self._ensure_table()
        if self._reads is not None:
            return self._reads.values(kind)
        query = sa.select(self.table.c.record_value).where(self.table.c.kind == kind)
        with self._engine.connect() as connection:
            return [str(value) for value in (connection.execute(query)).scalars()]

    def _now(self) -> float:
        query = _SERVER_CLOCK.get(self._dialect)
        if query is None:
            return super()._now()
        with self._engine.connect() as connection:
            value = (connection.execute(sa.text(query))).scalar_one()
        return float(value) if isinstance(value, int | float | Decimal) else float(str(value))

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        release_store_engine(self._engine)

    def _ensure_table(self) -> None:
        """Create the table once per instance; a concurrent creator elsewhere is fine."""
        with self._table_mutex:
            if self._table_ready:
                return
            if not self._table_exists():
                create = CreateTable(self.table, if_not_exists=True)
                try:
                    with self._engine.begin() as connection:
                        connection.execute(create)
                except DBAPIError:
                    # Another process created it between our check and our CREATE
                    # (PostgreSQL reports that race as a duplicate type).
                    if not self._table_exists():
                        raise
            self._table_ready = True

    def _table_exists(self) -> bool:
        """Whether the table answers a query (MySQL warns on `CREATE … IF NOT EXISTS`)."""
        try:
            with self._engine.connect() as connection:
                connection.execute(sa.select(self.table.c.kind).limit(0))
        except DBAPIError:
            return False
        return True


def create_control_store(url: str) -> DatabaseControlStore:
    """The control-store factory of this provider's descriptor, of this flavour."""
    return DatabaseControlStore(url)
