# Generated from sql_update_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`fenced_update`: a SQLAlchemy UPDATE that refuses a write stamped with an older token.

Runs the one statement of `sql_statement` on the caller's session or connection, in
the caller's transaction: the caller commits, and a rolled-back transaction leaves
neither the values nor the token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from firefly_scheduling.fencing.sql_statement import fenced_update_statement
from firefly_scheduling.fencing.token import DEFAULT_COLUMN

if TYPE_CHECKING:
    import sqlalchemy.orm
    from sqlalchemy import ColumnElement, CursorResult, Table


def fenced_update(
    session: sqlalchemy.orm.Session | sqlalchemy.Connection,
    table: Table | type[object],
    where: ColumnElement[bool],
    values: Mapping[str, Any],
    token: int | None,
    *,
    column: str = DEFAULT_COLUMN,
) -> bool:
    """Write `values` and `token` where `where` holds and the stored token is NULL or <= `token`.

    Returns whether a row was written; False means the stored token is newer (or no
    row matches `where`), and nothing was changed. An equal token writes: one holding
    may run two bodies, an adopted fire and its own. Compare tokens of one lock name
    on one backend only. `token` is typed `int | None` so that `current_fire().token`
    passes as it is; None is refused with the reason (`FencingTokenError`).
    """
    statement = fenced_update_statement(table, where, values, token, column, caller="fenced_update")
    result = cast("CursorResult[Any]", session.execute(statement))
    return result.rowcount > 0
