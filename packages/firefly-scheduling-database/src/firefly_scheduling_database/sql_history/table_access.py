"""How every call of the SQL run history reaches its table, and how it fails.

Each statement takes one of three paths, chosen once per store: a fire's statements
built once with bound parameters (`statements.HotStatements`), sent straight to the
driver on PostgreSQL and MySQL (`driver`), and every other one-statement call on the
engine in autocommit where the dialect gains by it (`statements.single_statements`).

The table is created, or checked, once per store, on first use (`verify` does it at
boot, so a host with an unusable table refuses to start instead of failing every
fire); a 0.1.0 table is refused with the command that upgrades it. Every operation
goes through `_call`, which turns driver errors into `HistoryError`s naming the store
without its password: within a fire the history only ever fails softly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.port import HistoryError
from firefly_scheduling.urls.redaction import scrub
from firefly_scheduling_database.sql_history.schema import OldHistoryTable, create_or_check
from firefly_scheduling_database.sql_history.statements import (
    DriverStatements,
    HotStatements,
    single_statements,
)
from firefly_scheduling_database.url import describe_url

logger = logging.getLogger("firefly_scheduling.history")

_T = TypeVar("_T")


class SqlTableAccess:
    """The engine and the table of a SQL history, created or checked once, thread-safe."""

    def __init__(self, engine: Engine, table: sa.Table) -> None:
        self._engine = engine
        self._table = table
        self._target, self._secrets = describe_url(engine.url)
        self._table_ready = False
        self._table_mutex = threading.Lock()
        self._dialect = engine.dialect.name
        #: Where a fire's one-statement writes and reads go (see `single_statements`).
        self._single = single_statements(engine)
        self._statements = HotStatements(table, self._dialect)
        #: PostgreSQL and MySQL: the per-fire statements on the driver (`driver`).
        self._driver = DriverStatements.for_store(engine, self._statements)

    def verify(self) -> None:
        """Check the table at boot: create it if absent, refuse a 0.1.0 one.

        `OldHistoryTable` (a `ConfigurationError` naming the table and the migration
        command) when the table has another shape. A `ConfigurationError` too when the
        database answers but the table is absent and cannot be created here (a role
        without CREATE rights, a read-only session): every fire would fail to record,
        so the host refuses to start, naming the table and `migrate --history`. An
        unreachable database is only logged: the history never stops a fire, and the
        check runs again on first use.
        """
        try:
            self._ensure_table()
        except (SQLAlchemyError, OSError) as err:
            detail = err.orig if isinstance(err, DBAPIError) and err.orig is not None else err
            problem = scrub(str(detail), self._secrets) or type(detail).__name__
            if self._answers_without_table():
                raise ConfigurationError(
                    f"the run-history table {self._table.name!r} does not exist in "
                    f"{self._target} and cannot be created there ({problem}); create it "
                    "once with `firefly-scheduling migrate --history --url URL` under a "
                    "role that may, or turn the history off with "
                    "FIREFLY_SCHEDULING_HISTORY_URL=off"
                ) from None
            logger.warning("%r: not checked at boot, will be on first use: %s", self, problem)

    def _answers_without_table(self) -> bool:
        """Whether the database answers and has no table of this store's name."""
        try:
            return not sa.inspect(self._engine).has_table(self._table.name)
        except (SQLAlchemyError, OSError):
            return False

    def _call(self, doing: str, operation: Callable[[], _T]) -> _T:
        try:
            self._ensure_table()
            return operation()
        except OldHistoryTable as err:
            # Within a fire the history only ever fails softly (logged, the fire runs).
            raise HistoryError(str(err)) from None
        except (SQLAlchemyError, OSError) as err:
            detail = err.orig if isinstance(err, DBAPIError) and err.orig is not None else err
            text = scrub(str(detail), self._secrets) or "no detail"
            raise HistoryError(
                f"database history store {self._target} failed while {doing}: "
                f"{type(detail).__name__}: {text}"
            ) from err

    def _ensure_table(self) -> None:
        """Create the table once per instance, or refuse an old one (`OldHistoryTable`)."""
        with self._table_mutex:
            if self._table_ready:
                return
            create_or_check(self._engine, self._table, where=self._target)
            self._table_ready = True
