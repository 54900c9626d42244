"""The one UPDATE a fenced SQLAlchemy write sends, built once for both flavours.

`UPDATE <table> SET <values>, <column> = :token WHERE <where> AND (<column> IS NULL OR
<column> <= :token)`: the check and the write are one statement, so the database's
row lock orders concurrent writers. A writer blocked behind a newer token's
uncommitted write re-reads the row when it commits (PostgreSQL's READ COMMITTED
re-check, InnoDB's locking read, SQLite's single writer) and is refused then.
Every value and the token are bound parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, Table, Update, or_, update

from firefly_scheduling.fencing.token import FencingTokenError, checked_column_name, checked_token


def fenced_update_statement(
    table: Any,
    where: Any,
    values: Mapping[str, Any],
    token: object,
    column: str,
    *,
    caller: str,
) -> Update:
    """The guarded UPDATE; a bad token, table, clause or column raises before anything is sent."""
    checked = checked_token(token, caller=caller)
    target = _table(table, caller=caller)
    name = checked_column_name(column, caller=caller)
    if name not in target.c:
        raise FencingTokenError(
            f"{caller}: table {target.name!r} has no fence column {name!r}"
            f" (its columns: {', '.join(target.c.keys())}); add it first"
        )
    if where is None or not isinstance(where, ColumnElement):
        raise FencingTokenError(
            f"{caller}: `where` must be a SQLAlchemy clause such as `table.c.id == 1`, got"
            f" {where!r}; a fenced write never updates a whole table by default"
        )
    unknown = [key for key in values if key not in target.c]
    if unknown:
        raise FencingTokenError(
            f"{caller}: table {target.name!r} has no column {', '.join(map(repr, unknown))}"
        )
    if name in values:
        raise FencingTokenError(
            f"{caller}: {name!r} is the fence column; the token is stored in it, not a value"
        )
    fence = target.c[name]
    return (
        update(target)
        .where(where)
        .where(or_(fence.is_(None), fence <= checked))
        .values({**values, name: checked})
    )


def _table(table: Any, *, caller: str) -> Table:
    """A Core `Table`, or a declarative model's (its `__table__`)."""
    resolved = getattr(table, "__table__", table)
    if not isinstance(resolved, Table):
        raise FencingTokenError(
            f"{caller}: `table` must be a SQLAlchemy Table or a mapped class, got {table!r}"
        )
    return resolved
