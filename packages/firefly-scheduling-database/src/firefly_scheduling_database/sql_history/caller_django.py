"""The task's Django transaction: `current_fire().atomic(using=...)` IS `transaction.atomic`.

The block enters `django.db.transaction.atomic(using=...)` itself, so the task's ORM
writes inside it and the guarded success `UPDATE` commit together when the
outermost atomic block commits (nested in another, it is a savepoint, and the outer
block decides). A stale run's error leaves through `atomic`, which rolls back.

The statement is the history's own, compiled for the database's SQLAlchemy dialect
with positional `%s` placeholders (what Django's cursors take on every backend), its
values processed by the columns' types as SQLAlchemy would bind them (instants as
the history stores them, MySQL's names as hex digits). Django is imported only
here, and only when a task asks for it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Final, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.atomic import GuardedSuccess
from firefly_scheduling_database.sql_history.same_database import (
    DatabaseIdentity,
    named,
    refuse_unless_same,
)
from firefly_scheduling_database.sql_history.success_statement import success_parameters

#: Django's vendors, and the SQLAlchemy dialect each compiles for (paramstyle `%s`).
_DIALECTS: Final = {
    "postgresql": ("sqlalchemy.dialects.postgresql.psycopg", "postgresql"),
    "mysql": ("sqlalchemy.dialects.mysql.mysqldb", "mysql"),
    "sqlite": ("sqlalchemy.dialects.sqlite.pysqlite", "sqlite"),
}


class PositionalStatement:
    """A statement compiled for `dialect` with `%s` placeholders, and its values' order."""

    def __init__(self, statement: sa.ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)  # a statement's compiler, with its binds
        self.sql = compiled.string
        self._order = list(compiled.positiontup or ())
        self._fixed = dict(compiled.params)
        self._processors = {
            name: bind.type.dialect_impl(dialect).bind_processor(dialect)
            for name, bind in compiled.binds.items()
        }

    def values(self, given: dict[str, Any]) -> list[Any]:
        merged = {**self._fixed, **given}
        bound = []
        for name in self._order:
            value, processor = merged[name], self._processors.get(name)
            bound.append(value if processor is None or value is None else processor(value))
        return bound


def _dialect(vendor: str) -> Dialect:
    import importlib  # noqa: PLC0415 - one dialect module, for the vendor asked

    module, _ = _DIALECTS[vendor]
    dialect: Dialect = importlib.import_module(module).dialect(paramstyle="format")
    return dialect


def django_identity(using: str) -> DatabaseIdentity:
    """The identity of Django's database `using` (its settings; no password shown)."""
    from django.db import connections  # noqa: PLC0415 - Django, only when asked for

    connection = connections[using]
    vendor = connection.vendor
    if vendor not in _DIALECTS:
        raise ConfigurationError(
            f"current_fire().atomic(using={using!r}): Django's {vendor!r} backend is not "
            "supported (PostgreSQL, MySQL/MariaDB and SQLite are)"
        )
    settings = connection.settings_dict
    host, port, name = settings.get("HOST"), settings.get("PORT"), settings.get("NAME")
    user = settings.get("USER") or ""
    shown = f"Django database {using!r} ({vendor}://{user}@{host or ''}:{port or ''}/{name})"
    return named(_DIALECTS[vendor][1], host or None, port or None, str(name), shown)


class DjangoTransaction:
    """`transaction.atomic(using=...)`, entered and left by the block (`CallerTransaction`)."""

    asynchronous: Literal[False] = False

    def __init__(
        self, using: str, statements: dict[bool, sa.Update], home: DatabaseIdentity
    ) -> None:
        self._using = using
        self._statements = statements
        self._home = home
        self._atomic: AbstractContextManager[Any] | None = None

    def enter(self) -> None:
        from django.db import transaction  # noqa: PLC0415 - Django, only when asked for

        refuse_unless_same(self._home, django_identity(self._using))
        atomic = transaction.atomic(using=self._using)
        atomic.__enter__()
        self._atomic = atomic

    def write(self, success: GuardedSuccess) -> int:
        from django.db import connections  # noqa: PLC0415 - Django, only when asked for

        connection = connections[self._using]
        statement = PositionalStatement(
            self._statements[success.token is None], _dialect(connection.vendor)
        )
        with connection.cursor() as cursor:
            cursor.execute(statement.sql, statement.values(success_parameters(success)))
            return int(cursor.rowcount)

    def close(self, error: BaseException | None, *, stale: bool) -> None:
        atomic = self._atomic
        assert atomic is not None
        if error is None:
            atomic.__exit__(None, None, None)
        else:
            atomic.__exit__(type(error), error, error.__traceback__)
