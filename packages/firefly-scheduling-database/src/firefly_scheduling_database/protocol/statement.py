"""`Statement`: one lease statement, rendered once, in both forms a lock sends it.

Statements are rendered once per lock, for its table names. A statement reads the
name as `{name}`: the parameter itself on PostgreSQL and SQLite, whose drivers bind
values outside the SQL text, and `UNHEX(:name)` on MySQL/MariaDB, whose drivers write
values into it (`LeaseSql.key`, `mysql_text`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import TextClause, text
from sqlalchemy.engine import Dialect

from firefly_scheduling_database.mysql_text import checked_inert


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
    its own, read one after another (`protocol.mysql`: a group of releases). Its
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
