"""Upgrade an older run-history table: 0.1.0's key, then the trigger columns.

The trigger columns: `trigger_kind` (what made each fire: scheduled, manual,
backfill) and `requested_by` (who asked), an `ADD COLUMN` each, the first with the
server default `scheduled`, so every existing row reads as a scheduled fire nobody
asked for. They follow the key upgrade below, or are added alone to a table that
has the key already (created before the columns were).

The key: 0.1.0 keyed a record by `(task, instant)`.

0.2.0 adds `lock_name` in front of the key (`schema`). Existing rows get
their task's target as lock name, which is the lock name of every task declared
with `lock=True` (the common case): their `running` records stay adoptable and
`monitor` keeps their last success. Rows of tasks with an explicit `lock="name"`
keep the target as lock name, so the next fires of such a task start a fresh series
under its real lock name (their old rows stay readable with `runs --task`).

Per dialect, the upgrade is:

* PostgreSQL: one transaction (DDL is transactional there): add the column with
  the server default, fill it, swap the primary key.
* MySQL/MariaDB: `ADD COLUMN`, `UPDATE`, then one `ALTER TABLE … DROP PRIMARY KEY,
  ADD PRIMARY KEY (…)`. MySQL commits each DDL statement, so each step checks
  what is already done and an interrupted run is completed by running it again.
* SQLite (which cannot change a primary key): copy into a new table and swap the
  names, inside one transaction.

Running it on a table that is already current changes nothing; on none, it creates it.
"""

from __future__ import annotations

from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from firefly_scheduling_database.sql_history.schema import (
    KEY,
    OLD_KEY,
    TRIGGER_COLUMNS,
    has_column,
    refuse_unless_current,
    runs_table,
    table_key,
)

_COLUMNS: Final = (
    "task",
    "instant",
    "node",
    "attempt",
    "state",
    "started_at",
    "ended_at",
    "error",
    "token",
)


def upgrade_history_table(engine: Engine, name: str) -> str:
    """Bring table `name` to this version's shape; 'created', 'upgraded' or 'current'.

    Raises `OldHistoryTable` for a table whose key is neither shape (not ours to touch).
    """
    with engine.connect() as connection:
        key = table_key(connection, name)
    if key is None:
        runs_table(name).create(engine, checkfirst=True)
        return "created"
    upgraded = False
    if key != KEY:
        if key != OLD_KEY:
            refuse_unless_current(key, table=name, where="this database")
        dialect = engine.dialect.name
        if dialect == "postgresql":
            _upgrade_postgres(engine, name)
        elif dialect == "sqlite":
            _upgrade_sqlite(engine, name)
        else:
            _upgrade_mysql(engine, name)
        upgraded = True
    upgraded = _add_trigger_column(engine, name) or upgraded
    return "upgraded" if upgraded else "current"


def _add_trigger_column(engine: Engine, name: str) -> bool:
    """Add `trigger_kind` (default `scheduled`) and `requested_by` (NULL) where the
    table lacks them, one `ADD COLUMN` each; whether it added any."""
    quoted = engine.dialect.identifier_preparer.quote(name)
    added = False
    for column_name in TRIGGER_COLUMNS:
        with engine.begin() as connection:
            if has_column(connection, name, column_name):
                continue
            column = runs_table(name).c[column_name]
            ddl = str(sa.schema.CreateColumn(column).compile(dialect=connection.dialect))
            connection.exec_driver_sql(f"ALTER TABLE {quoted} ADD COLUMN {ddl}")
            added = True
    return added


def _lock_name_ddl(connection: Connection, name: str) -> str:
    """`lock_name`'s column definition as `CREATE TABLE` would write it on this dialect."""
    column = runs_table(name).c.lock_name
    compiled = sa.schema.CreateColumn(column).compile(dialect=connection.dialect)
    return str(compiled).replace(" NOT NULL", "").strip() + " NOT NULL"


def _fill_lock_names(name: str) -> sa.Update:
    """Give every row without a lock name its task's target (the `lock=True` name).

    Rows a 0.1.0 node wrote while the column already existed got the default '' and
    are filled too, which is what makes re-running an interrupted upgrade safe.
    """
    table = sa.table(name, sa.column("lock_name"), sa.column("task"))
    return table.update().where(table.c.lock_name == "").values(lock_name=table.c.task)


def _upgrade_postgres(engine: Engine, name: str) -> None:
    preparer = engine.dialect.identifier_preparer
    quoted = preparer.quote(name)
    with engine.begin() as connection:
        constraint = sa.inspect(connection).get_pk_constraint(name).get("name")
        if not has_column(connection, name, "lock_name"):
            connection.exec_driver_sql(
                f"ALTER TABLE {quoted} ADD COLUMN {_lock_name_ddl(connection, name)}"
            )
        connection.execute(_fill_lock_names(name))
        if constraint:
            connection.exec_driver_sql(
                f"ALTER TABLE {quoted} DROP CONSTRAINT {preparer.quote(constraint)}"
            )
        connection.exec_driver_sql(f"ALTER TABLE {quoted} ADD PRIMARY KEY ({', '.join(KEY)})")


def _upgrade_mysql(engine: Engine, name: str) -> None:
    quoted = engine.dialect.identifier_preparer.quote(name)
    with engine.begin() as connection:
        if not has_column(connection, name, "lock_name"):
            connection.exec_driver_sql(
                f"ALTER TABLE {quoted} ADD COLUMN {_lock_name_ddl(connection, name)} FIRST"
            )
    with engine.begin() as connection:
        # Rows written by a 0.1.0 node meanwhile got the default ''; they are 0.1.0 rows.
        connection.execute(_fill_lock_names(name))
    with engine.begin() as connection:
        connection.exec_driver_sql(
            f"ALTER TABLE {quoted} DROP PRIMARY KEY, ADD PRIMARY KEY ({', '.join(KEY)})"
        )


def _upgrade_sqlite(engine: Engine, name: str) -> None:
    new = runs_table(name)
    staging = runs_table(f"{name}_v2", indexes=False)
    old = sa.table(name, *(sa.column(column) for column in _COLUMNS))
    copy = staging.insert().from_select(
        ["lock_name", *_COLUMNS], sa.select(old.c.task, *(old.c[c] for c in _COLUMNS))
    )
    with engine.connect() as connection:
        # pysqlite opens a transaction only before DML: open it ourselves so the DDL
        # below is in it too, and a failure leaves the 0.1.0 table as it was.
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            connection.exec_driver_sql(f'DROP TABLE IF EXISTS "{staging.name}"')
            staging.create(connection)
            connection.execute(copy)
            connection.exec_driver_sql(f'DROP TABLE "{name}"')
            connection.exec_driver_sql(f'ALTER TABLE "{staging.name}" RENAME TO "{name}"')
            for index in new.indexes:
                index.create(connection)
        except BaseException:
            connection.rollback()
            raise
        connection.commit()
