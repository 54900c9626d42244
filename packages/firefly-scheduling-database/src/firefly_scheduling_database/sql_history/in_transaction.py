"""The run's success written through the task's own connection (`current_fire().atomic`).

ONE statement joins the caller's transaction: an `UPDATE` of the fire's row to
`succeeded`, guarded like the history's `finish` and more strictly: the row must be
`running` under this run's attempt AND its fencing token (`token = :token`, or both
NULL), so a zombie whose fire a newer attempt took over matches nothing, and neither
does a run whose record is already finished. Parametrised, built once per table.

The caller's connection picks the way it is sent (`caller_transaction`): SQLAlchemy
(`Session`, `Connection` inside `begin()`, and their asyncio twins) executes the
statement itself, with the table's column types; psycopg 3 (PostgreSQL) gets the same
statement compiled for it (`driver.DriverStatement`); Django (`using=`) enters
`transaction.atomic` and sends it on the alias's cursor (`caller_django`). Each
checks first that the connection reaches the history's database (`same_database`).
Anything else is refused with a `ConfigurationError`. The driver modules are looked up in
`sys.modules` only: a connection of a driver never imported cannot be one of its.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import sqlalchemy as sa

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.atomic import AsyncCallerTransaction, CallerTransaction
from firefly_scheduling_database.sql_history.caller_django import DjangoTransaction
from firefly_scheduling_database.sql_history.caller_psycopg import PsycopgTransaction
from firefly_scheduling_database.sql_history.caller_psycopg_async import AsyncPsycopgTransaction
from firefly_scheduling_database.sql_history.caller_sqlalchemy import SqlAlchemyTransaction
from firefly_scheduling_database.sql_history.caller_sqlalchemy_async import (
    AsyncSqlAlchemyTransaction,
)
from firefly_scheduling_database.sql_history.same_database import of_url

if TYPE_CHECKING:
    from firefly_scheduling_database.sql_history.store import SqlRunHistory


def caller_transaction(
    history: SqlRunHistory, connection: object | None, using: str | None
) -> CallerTransaction | AsyncCallerTransaction:
    """The caller's transaction on `connection`, for `history`'s table; refused
    (`ConfigurationError`) for a connection this does not know, or `using`."""
    home = of_url(history.engine.url)
    statements = history.success_statements
    if using is not None:
        if connection is not None:
            raise ConfigurationError(
                f"current_fire().atomic() was given a connection and using={using!r}: "
                "pass one (using= names a Django database)"
            )
        return DjangoTransaction(using, statements, home)
    if connection is None:
        raise ConfigurationError(
            "current_fire().atomic() needs the task's connection (a SQLAlchemy Session or "
            "Connection, a psycopg 3 connection), or using='<alias>' for a Django database"
        )
    orm = sys.modules.get("sqlalchemy.orm")
    if isinstance(connection, sa.Connection) or (
        orm is not None and isinstance(connection, orm.Session)
    ):
        return SqlAlchemyTransaction(connection, statements, home)
    asyncio_ext = sys.modules.get("sqlalchemy.ext.asyncio")
    if asyncio_ext is not None and isinstance(
        connection, asyncio_ext.AsyncSession | asyncio_ext.AsyncConnection
    ):
        return AsyncSqlAlchemyTransaction(connection, statements, home)
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(connection, psycopg.Connection):
        return PsycopgTransaction(connection, history.success_on_driver, home)
    if psycopg is not None and isinstance(connection, psycopg.AsyncConnection):
        return AsyncPsycopgTransaction(connection, history.success_on_driver, home)
    raise ConfigurationError(
        f"current_fire().atomic() was given {type(connection).__module__}."
        f"{type(connection).__qualname__}; it takes a SQLAlchemy Session or Connection "
        "(or their asyncio twins), a psycopg 3 connection, or using='<alias>' (Django), "
        f"to the database of the run history ({home.shown})"
    )
