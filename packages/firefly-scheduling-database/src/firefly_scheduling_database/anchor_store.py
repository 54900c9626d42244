"""`DatabaseAnchorStore`: initial-delay anchors in a SQL table (entry point `database`).

One row per anchor in `firefly_scheduling_anchors`, created by `install()` (what
`firefly-scheduling migrate` runs) or else on first use (`CREATE TABLE IF NOT
EXISTS`; the store owns its engine, so the DDL never runs inside a caller's
transaction). `add` is an INSERT that ignores a duplicate key, spelled
for each dialect (`ON CONFLICT DO NOTHING RETURNING` on PostgreSQL and SQLite,
`INSERT IGNORE` on MySQL/MariaDB); `replace` is an `UPDATE … WHERE anchor_value =
:expected`. `now` is the server's clock on PostgreSQL and MySQL/MariaDB (one
`SELECT`), and this host's wall clock on SQLite, whose clock is this host's anyway.

The engine is the one the run history uses for the same URL (`store_engine`): the
lock backend's accepted URLs (bare `postgresql://`/`mysql://` get psycopg 3/PyMySQL),
its bounded timeouts, and the stores' share of the node's `max_connections`.
Keys are ASCII (readable or a digest) and compare byte for byte, as lock names do
(`C` collation on PostgreSQL, `ascii_bin` on MySQL/MariaDB). On MySQL/MariaDB keys and
values travel as hex digits the server decodes, and values come back as UTF-8 bytes
(`mysql_text`), whatever the session's sql_mode and client character set.
"""

from __future__ import annotations

import re
import threading
from decimal import Decimal
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.schema import CreateTable

from firefly_scheduling.initial_delay.base import BaseAnchorStore
from firefly_scheduling.initial_delay.port import AnchorStoreError
from firefly_scheduling.locks.server_keys import ServerKeyScheme
from firefly_scheduling_database.engine import release_store_engine, store_engine
from firefly_scheduling_database.mysql_text import HexBoundLongText, HexBoundText
from firefly_scheduling_database.url import describe_url

TABLE_NAME: Final = "firefly_scheduling_anchors"

_KEY_LENGTH: Final = 255
# Keys are stored as they are when printable ASCII that fits the column, else as a digest.
_KEYS: Final = ServerKeyScheme(
    readable_prefix="",
    hashed_prefix="firefly:scheduling:initial-delay:sha256:",
    max_length=_KEY_LENGTH,
    readable=re.compile(r"[!-~]+"),
)


class _AnchorKey(HexBoundText):
    """An anchor key, compared byte for byte: `C` on PostgreSQL, `ascii_bin` on MySQL.

    On MySQL/MariaDB it travels as hex digits (`mysql_text`), as every key may hold a
    quote or a backslash.
    """

    impl = sa.String(_KEY_LENGTH)
    cache_ok = True
    charset = "ascii"

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name in {"mysql", "mariadb"}:
            return dialect.type_descriptor(
                mysql.VARCHAR(_KEY_LENGTH, charset="ascii", collation="ascii_bin")
            )
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.VARCHAR(_KEY_LENGTH, collation="C"))
        return dialect.type_descriptor(sa.String(_KEY_LENGTH))


metadata = sa.MetaData()
anchors = sa.Table(
    TABLE_NAME,
    metadata,
    sa.Column("anchor_key", _AnchorKey(), primary_key=True),
    sa.Column("anchor_value", HexBoundLongText(), nullable=False),
)

_SERVER_CLOCK: Final[dict[str, str]] = {
    "postgresql": "SELECT EXTRACT(EPOCH FROM clock_timestamp())",
    "mysql": "SELECT UNIX_TIMESTAMP(NOW(6))",
    "mariadb": "SELECT UNIX_TIMESTAMP(NOW(6))",
}


class DatabaseAnchorStore(BaseAnchorStore):
    """Anchors as rows, shared by every process that reaches the database."""

    store_name = "database"
    shared_across_processes = True
    driver_errors = (SQLAlchemyError, OSError)
    key_scheme = _KEYS

    def __init__(self, url: str, *, max_connections: int | None = None) -> None:
        # Shared with the run history: their part of the node's budget (2 of the default 4).
        self._engine: Engine = store_engine(url, max_connections=max_connections)
        self._released = False
        target, secrets = describe_url(url)
        super().__init__(target=target, secrets=secrets)
        self._dialect = self._engine.dialect.name
        self._table_ready = False
        self._table_mutex = threading.Lock()

    def install(self) -> None:
        """Create the table if absent; safe to run again, and on several nodes at once."""
        try:
            self._ensure_table()
        except self.driver_errors as err:
            raise AnchorStoreError(
                f"database anchor store {self._target} could not create table "
                f"{TABLE_NAME!r}: {self._describe(err)}"
            ) from err

    def _add(self, key: str, value: str) -> bool:
        self._ensure_table()
        row = {"anchor_key": key, "anchor_value": value}
        with self._engine.begin() as connection:
            if self._dialect in {"postgresql", "sqlite"}:
                # RETURNING says whether the row was ours; psycopg's rowcount may be -1 here.
                insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
                statement = (
                    insert(anchors)
                    .values(row)
                    .on_conflict_do_nothing()
                    .returning(anchors.c.anchor_key)
                )
                return connection.execute(statement).first() is not None
            if self._dialect in {"mysql", "mariadb"}:
                ignore = mysql.insert(anchors).values(row).prefix_with("IGNORE")
                return connection.execute(ignore).rowcount == 1
        try:
            with self._engine.begin() as connection:
                connection.execute(anchors.insert().values(row))
        except IntegrityError:
            return False
        return True

    def _get(self, key: str) -> str | None:
        self._ensure_table()
        query = sa.select(anchors.c.anchor_value).where(anchors.c.anchor_key == key)
        with self._engine.connect() as connection:
            value = connection.execute(query).scalar_one_or_none()
        return None if value is None else str(value)

    def _replace(self, key: str, expected: str, value: str) -> bool:
        self._ensure_table()
        statement = (
            anchors.update()
            .where(anchors.c.anchor_key == key, anchors.c.anchor_value == expected)
            .values(anchor_value=value)
        )
        with self._engine.begin() as connection:
            return connection.execute(statement).rowcount == 1

    def _now(self) -> float:
        query = _SERVER_CLOCK.get(self._dialect)
        if query is None:
            return super()._now()
        with self._engine.connect() as connection:
            value = connection.execute(sa.text(query)).scalar_one()
        return float(value) if isinstance(value, int | float | Decimal) else float(str(value))

    def _close(self) -> None:
        if not self._released:
            self._released = True
            release_store_engine(self._engine)

    def _ensure_table(self) -> None:
        """Create the table once per instance; a concurrent creator elsewhere is fine."""
        with self._table_mutex:
            if self._table_ready:
                return
            try:
                with self._engine.begin() as connection:
                    connection.execute(CreateTable(anchors, if_not_exists=True))
            except DBAPIError:
                # Another process created it between our check and our CREATE.
                if not sa.inspect(self._engine).has_table(TABLE_NAME):
                    raise
            self._table_ready = True


def create_anchor_store(url: str) -> DatabaseAnchorStore:
    """The `anchor_store` factory of this provider's descriptor (`provider.py`)."""
    return DatabaseAnchorStore(url)
