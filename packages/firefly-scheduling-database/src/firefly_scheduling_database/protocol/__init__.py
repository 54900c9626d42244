"""The database lock's protocol without I/O: its statements, dialect by dialect.

`AsyncDatabaseLeaseLock` and the generated `DatabaseLeaseLock` send exactly these
statements to the same tables (`schema`), so the two flavours exclude each other.

* `statement`: a statement rendered once, as SQLAlchemy runs it and as the driver does;
* `dialect`: what every dialect's single and batch statements must do, and the
  helpers their texts share;
* `postgres`, `mysql`, `sqlite`: each dialect's statements and how to read its errors.
"""

from __future__ import annotations

from sqlalchemy.engine import Dialect

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling_database.protocol.dialect import LeaseBatches, LeaseSql
from firefly_scheduling_database.protocol.mysql import MySqlLeaseBatches, MySqlLeaseSql
from firefly_scheduling_database.protocol.postgres import PostgresLeaseBatches, PostgresLeaseSql
from firefly_scheduling_database.protocol.sqlite import SqliteLeaseBatches, SqliteLeaseSql
from firefly_scheduling_database.schema import LeaseTables

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


def lease_batches_for(dialect: Dialect, tables: LeaseTables) -> LeaseBatches | None:
    """The batch statements of `dialect`, or None where it acquires one by one."""
    for batches in (PostgresLeaseBatches, MySqlLeaseBatches, SqliteLeaseBatches):
        if dialect.name in batches.dialect_names:
            return batches(dialect, tables)
    return None
