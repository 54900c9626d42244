"""`SqlRunHistory`: the run history in a SQL table (history-store entry point `database`).

One row per fire in `firefly_scheduling_runs`, keyed by `(lock_name, task, instant)`
(`schema`), created on first use, on SQLite, PostgreSQL or MySQL/MariaDB. A
0.1.0 table, keyed by `(task, instant)`, is refused until `firefly-scheduling migrate
--history` upgrades it (`migration`). Every write the fire runner races
on is ONE atomic statement, so the rules of `firefly_scheduling.history.port` hold
between nodes:

* `finish` is a single conditional `UPDATE … WHERE state = 'running' AND (token IS
  NULL OR token <= :token)`: a zombie's late write with an older token matches no
  row, and a finished row never matches again.
* `start` is an insert-if-absent; when the row exists, a single conditional `UPDATE`
  takes it over only from a `skipped` row or a `running` row with an older token,
  incrementing `attempt` in the same statement (its `attempt` assignment comes first,
  because MySQL evaluates `SET` assignments left to right).
* `skip` is an insert-if-absent; `skip_many` the same as multi-row inserts (a node
  back from an outage records up to a thousand fires at once; `batch_writes`).
* `record_run` (the whole record of a run whose start went unrecorded, or whose
  finish was refused) is an insert-if-absent of the finished row; when the row
  exists, a single conditional `UPDATE` replaces it where the port's rules allow
  (`statements.whole_run_update`), and only when that matches nothing is the row
  read, to say whose it is. It is rare (a history that failed a start), so it stays
  on SQLAlchemy.
* `record_of` reads one record by its key: the record stage of a run whose
  `current_fire().atomic` block wrote its success reads it instead of sending
  `record_run`, which it sends only where that success did not commit.

On PostgreSQL a fire's three statements (the unfinished-runs read, the start's
insert, the finish) go straight to psycopg on a pooled connection in autocommit
(`driver`), and the other one-statement calls run in autocommit through
SQLAlchemy (`statements.single_statements`): one round trip each, no `BEGIN` and `COMMIT`. On
MySQL the finish, the unfinished-runs read and the start of an instant's runs go to
PyMySQL, each with its `COMMIT`.

Instants are stored as naive UTC with microseconds (`DATETIME(6)` on MySQL) and
read back as aware UTC. Task and lock names compare exactly (see `schema`). The
engine is built like the database lock's (`engine.store_engine`, shared with the
anchor store): bare `postgresql://` and `mysql://` URLs get psycopg 3 and PyMySQL, every
connect, statement and row-lock wait is bounded, so a hung server delays a fire by
seconds, never forever, and its pool is the stores' share of the node's
`max_connections` (2 of the default 4), without overflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cached_property, partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from firefly_scheduling.concurrency.grouped import GroupedCalls
from firefly_scheduling.fires.atomic import AsyncCallerTransaction, CallerTransaction
from firefly_scheduling.history.base import BaseRunHistory, RunEnd, RunStart, WholeRun, refusal
from firefly_scheduling.history.port import (
    SCHEDULED,
    HistoryError,
    NewRun,
    Recorded,
    RunState,
    checked_trigger,
    clip_error,
    clip_requested_by,
)
from firefly_scheduling.schedule.instants import as_utc
from firefly_scheduling_database.engine import release_store_engine, store_engine
from firefly_scheduling_database.sql_history import batch_writes, queries
from firefly_scheduling_database.sql_history.driver import DriverStatement
from firefly_scheduling_database.sql_history.in_transaction import caller_transaction
from firefly_scheduling_database.sql_history.reads import SqlHistoryReads
from firefly_scheduling_database.sql_history.rows import (
    row_key,
    running_row,
    skipped_row,
    started_row,
    whole_run_row,
)
from firefly_scheduling_database.sql_history.schema import (
    DEFAULT_TABLE,
    runs_table,
)
from firefly_scheduling_database.sql_history.statements import (
    is_key,
    key_of,
    key_parameters,
    retry_takeover,
    takeover,
    whole_run_update,
)
from firefly_scheduling_database.sql_history.success_statement import success_statements

__all__ = ["DEFAULT_TABLE", "SqlRunHistory", "create_history_store", "runs_table"]


#: How often `record_run` tries again when the row changed between its statements.
RECORD_RUN_ROUNDS = 3
#: The most finishes sent as one text (each a few hundred bytes).
FINISHES_PER_GROUP = 200
#: Rows per multi-row insert: SQLite before 3.32 allows 999 parameters (9 per row).
_ROWS_PER_INSERT = {"sqlite": 100, "default": 1000}


class SqlRunHistory(SqlHistoryReads, BaseRunHistory):
    """A `RunHistory` in a SQL table, shared by every node that reaches the database.

    The writes are here; the reads are `SqlHistoryReads`' (`reads`).

    Thread-safe (each call takes a pooled connection for one short transaction).
    Driver errors become `HistoryError`s naming the store without the password.
    """

    def __init__(
        self, url: str, *, table: str = DEFAULT_TABLE, max_connections: int | None = None
    ) -> None:
        # Shared with the anchor store: their part of the node's budget (2 of the default 4).
        super().__init__(store_engine(url, max_connections=max_connections), runs_table(table))
        self._released = False
        #: The finishes of concurrent fires, sent together (`batch_writes`).
        self._finishes: GroupedCalls[Mapping[str, Any], bool] | None = None
        if self._driver is not None:
            together = partial(batch_writes.finished_together, self._driver)
            self._finishes = GroupedCalls(together, most=FINISHES_PER_GROUP)
        elif self._dialect == "sqlite":
            one_transaction = partial(
                batch_writes.finished_in_one_transaction, self._single, self._statements
            )
            self._finishes = GroupedCalls(one_transaction, most=FINISHES_PER_GROUP)

    @property
    def table(self) -> sa.Table:
        return self._table

    @property
    def engine(self) -> Engine:
        return self._engine

    # -- the outcome in the task's transaction (`current_fire().atomic`) ----------------

    @cached_property
    def success_statements(self) -> dict[bool, sa.Update]:
        """The guarded success `UPDATE` (`success_statement`), by a run's lack of token."""
        return success_statements(self._table)

    @cached_property
    def success_on_driver(self) -> dict[bool, DriverStatement]:
        """`success_statements` compiled for this store's driver (psycopg callers)."""
        return {
            tokenless: DriverStatement(statement, self._engine)
            for tokenless, statement in self.success_statements.items()
        }

    def caller_transaction(
        self, connection: object | None, *, using: str | None
    ) -> CallerTransaction | AsyncCallerTransaction:
        """`TransactionalHistory`: the task's transaction on `connection`
        (`in_transaction`); a `ConfigurationError` for another database or an unknown
        connection."""
        return caller_transaction(self, connection, using)

    def install(self) -> None:
        """Create the table if absent; safe to run again, and on several nodes at once."""
        self._call("creating its table", self._ensure_table)

    # -- writes --------------------------------------------------------------------

    def _start(self, begin: RunStart) -> int | None:
        key = key_of(begin.lock, begin.task, begin.instant)
        row = started_row(begin, key)

        def write() -> int | None:
            if self._inserted_if_absent(row):
                return 1
            with self._engine.begin() as connection:
                if connection.execute(takeover(self._table, begin, key)).rowcount != 1:
                    return None
                # The row stays locked by our UPDATE until commit: this is our attempt.
                attempt = connection.execute(
                    sa.select(self._table.c.attempt).where(is_key(self._table, key))
                ).scalar_one()
                return int(attempt)

        return self._call("starting a run", write)

    def start_retry(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        token: int | None,
        after_attempt: int,
        note: str | None,
        at: datetime,
    ) -> int | None:
        """`RetryStartingHistory.start_retry`: one conditional `UPDATE`."""
        begin = RunStart(lock, task, as_utc(instant), node, token, as_utc(at))
        key = key_of(lock, task, begin.instant)
        update = retry_takeover(
            self._table, begin, key, after_attempt=after_attempt, note=clip_error(note)
        )
        taken = self._call("starting a retry", lambda: self._rowcount(update) == 1)
        return after_attempt + 1 if taken else None

    def start_new_many(self, runs: Sequence[NewRun], *, node: str, at: datetime) -> list[bool]:
        """`BatchStartingHistory.start_new_many`: one statement on PostgreSQL, two
        elsewhere (`batch_writes`)."""
        at = as_utc(at)
        rows = [running_row(run, node=node, at=at) for run in runs]
        if not rows:
            return []
        driver = self._driver
        if driver is not None and driver.start_new_many is not None:
            on_driver = driver.start_new_many
            started = self._call(
                "starting runs",
                lambda: batch_writes.started_on_driver(driver.path, on_driver, rows),
            )
        else:
            started = self._call(
                "starting runs",
                lambda: batch_writes.started_in_two(self._engine, self._statements, driver, rows),
            )
        return [row_key(row) in started for row in rows]

    def _record_run(self, run: WholeRun) -> Recorded:
        key = key_of(run.lock, run.task, run.instant)
        row = whole_run_row(run, key)
        runs = self._table

        def write() -> Recorded:
            # Each round is an insert, then an update, each conditional on what it
            # replaces; a row that changed between them (pruned, skipped, taken over)
            # sends the write round again.
            for _ in range(RECORD_RUN_ROUNDS):
                if self._inserted_if_absent(row):
                    return Recorded.WRITTEN
                with self._engine.begin() as connection:
                    if connection.execute(whole_run_update(runs, run, key)).rowcount == 1:
                        return Recorded.WRITTEN
                    found = connection.execute(
                        sa.select(runs.c.state, runs.c.token).where(is_key(runs, key))
                    ).first()
                if found is not None:
                    refused = refusal(RunState(found.state), found.token, run.token, run.state)
                    if refused is not None:
                        return refused
            raise HistoryError(
                f"{self!r}: the record of {run.task} @ {run.instant.isoformat()} changed "
                f"under each of {RECORD_RUN_ROUNDS} writes of its run"
            )

        return self._call("recording a run", write)

    def _finish(self, end: RunEnd) -> bool:
        parameters = {
            **key_parameters(end.lock, end.task, end.instant),
            "p_token": end.token,
            "p_state": end.state.value,
            "p_ended_at": end.at,
            "p_error": end.error,
        }
        finishes = self._finishes
        if finishes is not None:
            return self._call("finishing a run", lambda: finishes.call(parameters))
        driver = self._driver
        if driver is not None:
            on_driver = driver.finish[end.token is None]
            return self._call(
                "finishing a run", lambda: driver.path.rowcount(on_driver, parameters) == 1
            )
        statement = self._statements.finish[end.token is None]
        return self._call("finishing a run", lambda: self._rowcount(statement, parameters) == 1)

    def skip(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        reason: str,
        at: datetime,
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> bool:
        row = skipped_row(
            lock,
            task,
            as_utc(instant),
            node=node,
            reason=reason,
            at=at,
            trigger=checked_trigger(trigger),
            requested_by=clip_requested_by(requested_by),
        )

        return self._call("recording a skip", lambda: self._inserted_if_absent(row))

    def buffer(
        self, task: str, instant: datetime, *, lock: str, node: str, reason: str, at: datetime
    ) -> bool:
        row = skipped_row(
            lock, task, as_utc(instant), node=node, reason=reason, at=at, state=RunState.BUFFERED
        )
        return self._call("recording a buffered fire", lambda: self._inserted_if_absent(row))

    def skip_many(
        self,
        task: str,
        instants: Sequence[datetime],
        *,
        lock: str,
        node: str,
        reason: str,
        at: datetime,
    ) -> int:
        """`skip` for each of `instants`, as multi-row inserts in one transaction.

        A node back from an outage records up to a thousand fires here at once
        (`batch_writes`). Rows go in instant order, so two nodes writing the same
        catch-up lock the same keys in the same order.
        """
        keys = sorted({as_utc(instant) for instant in instants})
        rows = [skipped_row(lock, task, key, node=node, reason=reason, at=at) for key in keys]
        size = _ROWS_PER_INSERT.get(self._dialect, _ROWS_PER_INSERT["default"])

        def write() -> int:
            with self._engine.begin() as connection:
                return sum(
                    batch_writes.insert_absent_rows(
                        connection, self._statements, rows[start : start + size]
                    )
                    for start in range(0, len(rows), size)
                )

        return self._call("recording skips", write) if rows else 0

    def expire_dead(self, started_before: datetime, *, at: datetime) -> int:
        statement = queries.expire_dead(self._table, started_before, at=at)
        return self._call("expiring dead runs", lambda: self._rowcount(statement))

    def prune(self, before: datetime) -> int:
        statement = queries.prune(self._table, before)
        return self._call("pruning", lambda: self._rowcount(statement))

    def close(self) -> None:
        if not self._released:
            self._released = True
            release_store_engine(self._engine)

    def __repr__(self) -> str:
        return f"SqlRunHistory({self._target!r}, table={self._table.name!r})"

    # -- machinery -------------------------------------------------------------------

    def _inserted_if_absent(self, row: dict[str, Any]) -> bool:
        """`batch_writes.insert_if_absent` in a statement of its own (a `start`, a `skip`)."""
        driver = self._driver
        if driver is not None and driver.insert_if_absent is not None:
            return bool(driver.path.rows(driver.insert_if_absent, row))
        with self._single.begin() as connection:
            return batch_writes.insert_if_absent(connection, self._statements, row)

    def _rowcount(self, statement: sa.Executable, parameters: dict[str, Any] | None = None) -> int:
        """Run one `UPDATE` or `DELETE`, atomic on its own; how many rows it matched."""
        with self._single.begin() as connection:
            return int(connection.execute(statement, parameters).rowcount)


def create_history_store(url: str) -> SqlRunHistory:
    """The database descriptor's history-store factory; checks the table.

    Called when a host boots and by `runs`, `monitor` and `prune`: a 0.1.0 table is
    refused there, with the command that upgrades it, rather than on a fire.
    """
    store = SqlRunHistory(url)
    try:
        store.verify()
    except BaseException:
        store.close()
        raise
    return store
