# Generated from caller_psycopg_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""The task's psycopg 3 transaction, as `current_fire().atomic(...)` drives it.

Written once, for asyncio (`psycopg.AsyncConnection`), in `caller_psycopg_async.py`;
`caller_psycopg.py` (`psycopg.Connection`) is generated from it by
`tools/async_to_sync.py`.

The guarded statement is the history's own, compiled for psycopg once
(`driver.DriverStatement`: the same text in its paramstyle, instants bound as the
naive UTC the column holds). A connection in autocommit outside a
`transaction()` block would commit the write on its own, apart from the task's
writes: it is refused. A stale run's transaction is rolled back: by the caller's
`transaction()` block the error passes through, or here when there is none.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any, Literal

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.atomic import GuardedSuccess
from firefly_scheduling_database.sql_history.driver import DriverStatement
from firefly_scheduling_database.sql_history.same_database import (
    DatabaseIdentity,
    of_psycopg,
    refuse_unless_same,
)
from firefly_scheduling_database.sql_history.success_statement import success_parameters

AUTOCOMMIT_OUTSIDE_A_TRANSACTION = (
    "current_fire().atomic() was given a psycopg connection in autocommit outside a "
    "transaction: enter it inside `with conn.transaction():` so the outcome commits with "
    "the task's writes"
)


class PsycopgTransaction:
    """A psycopg 3 connection's transaction (`CallerTransaction`)."""

    asynchronous: Literal[False] = False

    def __init__(
        self,
        connection: Any,
        statements: dict[bool, DriverStatement],
        home: DatabaseIdentity,
    ) -> None:
        self._connection = connection
        self._statements = statements
        self._home = home

    def enter(self) -> None:
        refuse_unless_same(self._home, of_psycopg(self._connection))

    def write(self, success: GuardedSuccess) -> int:
        connection = self._connection
        from psycopg.pq import TransactionStatus  # noqa: PLC0415 - the caller's driver

        idle = connection.info.transaction_status == TransactionStatus.IDLE
        if connection.autocommit and idle:
            raise ConfigurationError(AUTOCOMMIT_OUTSIDE_A_TRANSACTION)
        statement = self._statements[success.token is None]
        cursor = connection.execute(
            statement.sql, statement.parameters(success_parameters(success))
        )
        return int(cursor.rowcount)

    def close(self, error: BaseException | None, *, stale: bool) -> None:
        if not stale:
            return
        from psycopg import ProgrammingError  # noqa: PLC0415 - the caller's driver

        # Inside `transaction()` psycopg refuses it: the error passing through rolls back.
        with suppress(ProgrammingError):
            self._connection.rollback()
