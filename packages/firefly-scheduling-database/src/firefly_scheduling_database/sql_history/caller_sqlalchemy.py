# Generated from caller_sqlalchemy_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The task's SQLAlchemy transaction, as `current_fire().atomic(...)` drives it.

Written once, for asyncio (`AsyncSession`, `AsyncConnection`), in
`caller_sqlalchemy_async.py`; `caller_sqlalchemy.py` (`Session`, `Connection`) is
generated from it by `tools/async_to_sync.py`.

A session's transaction is begun at the block's start if it has none yet; a
connection must already be inside `begin()`. The statement runs through the caller's
object with the table's column types, so instants and MySQL's hex-bound names bind as
the history's own writes do. The transaction the block started in must still be the
one the write joins: a commit or rollback inside the block would leave the outcome
outside the task's writes, and is refused. A stale run's transaction is rolled back
here (and again, harmlessly, by the caller's `begin()` block the error passes
through).
"""

from __future__ import annotations

from typing import Any, Literal

import sqlalchemy as sa

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.atomic import AtomicOutcomeError, GuardedSuccess
from firefly_scheduling_database.sql_history.same_database import (
    DatabaseIdentity,
    of_url,
    refuse_unless_same,
)
from firefly_scheduling_database.sql_history.success_statement import success_parameters

NOT_IN_A_TRANSACTION = (
    "current_fire().atomic() was given a SQLAlchemy connection outside a transaction: "
    "enter it inside `with connection.begin():` so the outcome commits with the task's writes"
)
TRANSACTION_CHANGED = (
    "current_fire().atomic(): the transaction the block began in was committed or rolled "
    "back inside it; commit after the block, so the outcome commits with the task's writes"
)


class SqlAlchemyTransaction:
    """A session's or a connection's transaction (`CallerTransaction`)."""

    asynchronous: Literal[False] = False

    def __init__(
        self, caller: Any, statements: dict[bool, sa.Update], home: DatabaseIdentity
    ) -> None:
        self._caller = caller
        self._statements = statements
        self._home = home
        self._transaction: object = None
        self._session = not isinstance(caller, sa.Connection)

    def _current(self) -> object:
        """The caller's transaction now (compared by identity)."""
        caller = self._caller
        return caller.get_transaction()

    def enter(self) -> None:
        caller = self._caller
        if self._session:
            connection = caller.connection()  # begins the session's transaction if none
        else:
            if not caller.in_transaction():
                raise ConfigurationError(NOT_IN_A_TRANSACTION)
            connection = caller
        refuse_unless_same(self._home, of_url(connection.engine.url))
        self._transaction = self._current()

    def write(self, success: GuardedSuccess) -> int:
        if self._current() is not self._transaction:
            raise AtomicOutcomeError(TRANSACTION_CHANGED)
        statement = self._statements[success.token is None]
        result = self._caller.execute(statement, success_parameters(success))
        return int(result.rowcount)

    def close(self, error: BaseException | None, *, stale: bool) -> None:
        if stale:
            self._caller.rollback()
