"""`DatabaseRunHistory`: the run history in a SQL table (history-store entry point `database`).

One row per fire in `firefly_scheduling_runs`, keyed by `(lock_name, task, instant)`
(`history_schema`), created on first use, on SQLite, PostgreSQL or MySQL/MariaDB. A
0.1.0 table, keyed by `(task, instant)`, is refused until `firefly-scheduling migrate
--history` upgrades it (`history_migration`). Every write the fire runner races
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
  back from an outage records up to a thousand fires at once).
* `record_run` (the whole record of a run whose start went unrecorded, or whose
  finish was refused) is an insert-if-absent of the finished row; when the row
  exists, a single conditional `UPDATE` replaces it where the port's rules allow
  (`_whole_run_update`), and only when that matches nothing is the row read, to say
  whose it is. It is rare (a history that failed a start), so it stays on SQLAlchemy.

On PostgreSQL a fire's three statements (the unfinished-runs read, the start's
insert, the finish) go straight to psycopg on a pooled connection in autocommit
(`history_driver`), and the other one-statement calls run in autocommit through
SQLAlchemy (`_single_statements`): one round trip each, no `BEGIN` and `COMMIT`. On
MySQL the finish, the unfinished-runs read and the start of an instant's runs go to
PyMySQL, each with its `COMMIT`.

Instants are stored as naive UTC with microseconds (`DATETIME(6)` on MySQL) and
read back as aware UTC. Task and lock names compare exactly (see `history_schema`). The engine
is built like the database lock's (`engine.store_engine`, shared with the anchor
store): bare `postgresql://` and `mysql://` URLs get psycopg 3 and PyMySQL, every
connect, statement and row-lock wait is bounded, so a hung server delays a fire by
seconds, never forever, and its pool is the stores' share of the node's
`max_connections` (2 of the default 4), without overflow.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache, partial
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from firefly_scheduling.concurrency.grouped import GroupedCalls
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.base import BaseRunHistory, RunEnd, RunStart, WholeRun, refusal
from firefly_scheduling.history.port import (
    EXPIRED_BY_PRUNE,
    FINISHED_STATES,
    HistoryError,
    NewRun,
    Recorded,
    RunRecord,
    RunState,
    clip_error,
)
from firefly_scheduling.schedule.instants import as_utc
from firefly_scheduling.urls.redaction import scrub
from firefly_scheduling_database.engine import release_store_engine, store_engine
from firefly_scheduling_database.sql_history.driver import DriverPath, DriverStatement
from firefly_scheduling_database.sql_history.schema import (
    DEFAULT_TABLE,
    OldHistoryTable,
    UtcDateTime,
    refuse_unless_current,
    runs_table,
    table_key,
)
from firefly_scheduling_database.url import describe_url

__all__ = ["DEFAULT_TABLE", "DatabaseRunHistory", "create_history_store", "runs_table"]

_T = TypeVar("_T")
logger = logging.getLogger("firefly_scheduling.history")


class DatabaseRunHistory(BaseRunHistory):
    """A `RunHistory` in a SQL table, shared by every node that reaches the database.

    Thread-safe (each call takes a pooled connection for one short transaction).
    Driver errors become `HistoryError`s naming the store without the password.
    """

    def __init__(
        self, url: str, *, table: str = DEFAULT_TABLE, max_connections: int | None = None
    ) -> None:
        self._table = runs_table(table)
        # Shared with the anchor store: their part of the node's budget (2 of the default 4).
        self._engine: Engine = store_engine(url, max_connections=max_connections)
        self._released = False
        self._target, self._secrets = describe_url(self._engine.url)
        self._dialect = self._engine.dialect.name
        #: Where a fire's one-statement writes and reads go (see `_single_statements`).
        self._single = _single_statements(self._engine)
        self._table_ready = False
        self._table_mutex = threading.Lock()
        self._statements = _HotStatements(self._table, self._dialect)
        #: PostgreSQL and MySQL: the per-fire statements on the driver (`history_driver`).
        self._driver = _DriverStatements.for_store(self._engine, self._statements)
        #: The finishes of concurrent fires, sent together (`_finished_together`; on
        #: SQLite `_finished_in_one_transaction`).
        self._finishes: GroupedCalls[Mapping[str, Any], bool] | None = None
        if self._driver is not None:
            together = partial(_finished_together, self._driver)
            self._finishes = GroupedCalls(together, most=FINISHES_PER_GROUP)
        elif self._dialect == "sqlite":
            self._finishes = GroupedCalls(
                self._finished_in_one_transaction, most=FINISHES_PER_GROUP
            )

    @property
    def table(self) -> sa.Table:
        return self._table

    @property
    def engine(self) -> Engine:
        return self._engine

    def install(self) -> None:
        """Create the table if absent; safe to run again, and on several nodes at once."""
        self._call("creating its table", self._ensure_table)

    # -- writes --------------------------------------------------------------------

    def _start(self, begin: RunStart) -> int | None:
        key = self._key(begin.lock, begin.task, begin.instant)
        token = begin.token
        row = {
            **key,
            "node": begin.node,
            "attempt": 1,
            "state": RunState.RUNNING.value,
            "started_at": begin.at,
            "ended_at": None,
            "error": None,
            "token": token,
        }

        def write() -> int | None:
            if self._inserted_if_absent(row):
                return 1
            with self._engine.begin() as connection:
                if connection.execute(self._takeover(begin, key)).rowcount != 1:
                    return None
                # The row stays locked by our UPDATE until commit: this is our attempt.
                attempt = connection.execute(
                    sa.select(self._table.c.attempt).where(self._is(key))
                ).scalar_one()
                return int(attempt)

        return self._call("starting a run", write)

    def start_new_many(self, runs: Sequence[NewRun], *, node: str, at: datetime) -> list[bool]:
        """`BatchStartingHistory.start_new_many`: one statement on PostgreSQL.

        Elsewhere two in one transaction: the batch's records that stand in the way
        are read, then the new runs inserted as one multi-row insert. A record
        written between the two (a skip by a node that was too late) fails the whole
        insert on its key, and nothing is started here: every fire of the batch then
        starts the usual way.
        """
        at = as_utc(at)
        rows = [_running_row(run, node=node, at=at) for run in runs]
        if not rows:
            return []
        driver = self._driver
        if driver is not None and driver.start_new_many is not None:
            on_driver = driver.start_new_many
            started = self._call(
                "starting runs", lambda: self._started_on_driver(driver.path, on_driver, rows)
            )
        else:
            started = self._call("starting runs", lambda: self._started_in_two(rows))
        return [_row_key(row) in started for row in rows]

    def _started_on_driver(
        self, path: DriverPath, statement: DriverStatement, rows: list[dict[str, Any]]
    ) -> set[tuple[str, str, datetime]]:
        parameters = {
            "p_lock_names": [row["lock_name"] for row in rows],
            "p_tasks": [row["task"] for row in rows],
            "p_instants": [row["instant"] for row in rows],
            "p_tokens": [row["token"] for row in rows],
            "p_node": rows[0]["node"],
            "p_started_at": rows[0]["started_at"],
        }
        return {_row_key(row) for row in path.rows(statement, parameters)}

    def _started_in_two(self, rows: list[dict[str, Any]]) -> set[tuple[str, str, datetime]]:
        lock_names = sorted({row["lock_name"] for row in rows})
        instants = sorted({row["instant"] for row in rows})
        parameters = {"p_lock_names": lock_names, "p_instants": instants}
        driver = self._driver
        if driver is not None and driver.in_the_way is not None and driver.insert is not None:
            started = driver.path.read_then_insert(
                driver.in_the_way(len(lock_names), len(instants)),
                _numbered("p_lock_name", lock_names) | _numbered("p_instant", instants),
                driver.insert,
                lambda found: [_prefixed(row) for row in _fresh(rows, found)],
            )
            return set() if started is None else {_row_key(_unprefixed(r)) for r in started}
        try:
            with self._engine.begin() as connection:
                found = connection.execute(self._statements.in_the_way, parameters).mappings()
                fresh = _fresh(rows, found)
                if fresh:
                    connection.execute(self._table.insert(), fresh)
        except IntegrityError:
            return set()
        return {_row_key(row) for row in fresh}

    def _takeover(self, begin: RunStart, key: dict[str, Any]) -> sa.Update:
        """The `start` of a fire whose row exists: only from `skipped` or an older run.

        Built only when the insert met a row (an adopted fire, a fire recorded as
        skipped first), not for every start.
        """
        runs, token = self._table, begin.token
        older = sa.true() if token is None else sa.or_(runs.c.token.is_(None), runs.c.token < token)
        return (
            runs.update()
            .where(
                self._is(key),
                sa.or_(
                    runs.c.state == RunState.SKIPPED.value,
                    sa.and_(runs.c.state == RunState.RUNNING.value, older),
                ),
            )
            # `attempt` first: MySQL's later assignments would see the new `state`.
            .ordered_values(
                (
                    runs.c.attempt,
                    sa.case((runs.c.state == RunState.RUNNING.value, runs.c.attempt + 1), else_=1),
                ),
                (runs.c.state, RunState.RUNNING.value),
                (runs.c.node, begin.node),
                (runs.c.token, token),
                (runs.c.started_at, begin.at),
                (runs.c.ended_at, None),
                (runs.c.error, None),
            )
        )

    def _record_run(self, run: WholeRun) -> Recorded:
        key = self._key(run.lock, run.task, run.instant)
        row = {
            **key,
            "node": run.node,
            "attempt": 1,
            "state": run.state.value,
            "started_at": run.started_at,
            "ended_at": run.ended_at,
            "error": run.error,
            "token": run.token,
        }
        runs = self._table

        def write() -> Recorded:
            # Each round is an insert, then an update, each conditional on what it
            # replaces; a row that changed between them (pruned, skipped, taken over)
            # sends the write round again.
            for _ in range(RECORD_RUN_ROUNDS):
                if self._inserted_if_absent(row):
                    return Recorded.WRITTEN
                with self._engine.begin() as connection:
                    if connection.execute(self._whole_run_update(run, key)).rowcount == 1:
                        return Recorded.WRITTEN
                    found = connection.execute(
                        sa.select(runs.c.state, runs.c.token).where(self._is(key))
                    ).first()
                if found is not None:
                    refused = refusal(RunState(found.state), found.token, run.token)
                    if refused is not None:
                        return refused
            raise HistoryError(
                f"{self!r}: the record of {run.task} @ {run.instant.isoformat()} changed "
                f"under each of {RECORD_RUN_ROUNDS} writes of its run"
            )

        return self._call("recording a run", write)

    def _whole_run_update(self, run: WholeRun, key: dict[str, Any]) -> sa.Update:
        """`record_run` over an existing row: a skip, a `running` row the run may close,
        or a finished row of an older token; the attempt as `history.port` numbers it.

        `attempt` is assigned first: MySQL's later assignments would see the new
        `state` and `token`.
        """
        runs, token = self._table, run.token
        skipped = runs.c.state == RunState.SKIPPED.value
        running = runs.c.state == RunState.RUNNING.value
        finished = runs.c.state.in_(sorted(state.value for state in FINISHED_STATES))
        if token is None:
            replaceable = sa.or_(skipped, sa.and_(running, runs.c.token.is_(None)))
            attempt = sa.case((skipped, 1), else_=runs.c.attempt)
        else:
            newer = sa.or_(runs.c.token.is_(None), runs.c.token < token)
            no_newer = sa.or_(runs.c.token.is_(None), runs.c.token <= token)
            replaceable = sa.or_(skipped, sa.and_(running, no_newer), sa.and_(finished, newer))
            attempt = sa.case((skipped, 1), (newer, runs.c.attempt + 1), else_=runs.c.attempt)
        return (
            runs.update()
            .where(self._is(key), replaceable)
            .ordered_values(
                (runs.c.attempt, attempt),
                (runs.c.state, run.state.value),
                (runs.c.node, run.node),
                (runs.c.token, token),
                (runs.c.started_at, run.started_at),
                (runs.c.ended_at, run.ended_at),
                (runs.c.error, run.error),
            )
        )

    def _finish(self, end: RunEnd) -> bool:
        parameters = {
            **_key_parameters(end.lock, end.task, end.instant),
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

    def _finished_in_one_transaction(self, finishes: Sequence[Mapping[str, Any]]) -> list[bool]:
        """A group of finishes (`GroupedCalls`) on SQLite: one transaction, an answer each.

        Each finish is its own statement, on its own conditions, answered by its own
        row count; the group commits once. On SQLite a commit takes the file's write
        lock (and syncs the log), and one per finish put the fires of an instant behind
        one another and behind the other nodes' writes (issue 12). A group is written
        whole or not at all.
        """
        finish = self._statements.finish
        with self._single.begin() as connection:
            return [
                connection.execute(finish[parameters["p_token"] is None], parameters).rowcount == 1
                for parameters in finishes
            ]

    def skip(
        self, task: str, instant: datetime, *, lock: str, node: str, reason: str, at: datetime
    ) -> bool:
        row = _skipped_row(lock, task, as_utc(instant), node=node, reason=reason, at=at)

        return self._call("recording a skip", lambda: self._inserted_if_absent(row))

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

        A node back from an outage records up to a thousand fires here at once; one
        statement and one commit each kept the fires due at boot waiting (issue 12).
        Rows go in instant order, so two nodes writing the same catch-up lock the
        same keys in the same order.
        """
        keys = sorted({as_utc(instant) for instant in instants})
        rows = [_skipped_row(lock, task, key, node=node, reason=reason, at=at) for key in keys]
        size = _ROWS_PER_INSERT.get(self._dialect, _ROWS_PER_INSERT["default"])

        def write() -> int:
            with self._engine.begin() as connection:
                return sum(
                    self._insert_absent_rows(connection, rows[start : start + size])
                    for start in range(0, len(rows), size)
                )

        return self._call("recording skips", write) if rows else 0

    def expire_dead(self, started_before: datetime, *, at: datetime) -> int:
        runs = self._table
        statement = (
            runs.update()
            .where(
                runs.c.state == RunState.RUNNING.value,
                runs.c.started_at < as_utc(started_before),
            )
            .values(state=RunState.EXPIRED.value, ended_at=as_utc(at), error=EXPIRED_BY_PRUNE)
        )
        return self._call("expiring dead runs", lambda: self._rowcount(statement))

    def prune(self, before: datetime) -> int:
        runs = self._table
        statement = runs.delete().where(
            runs.c.state != RunState.RUNNING.value, runs.c.instant < as_utc(before)
        )
        return self._call("pruning", lambda: self._rowcount(statement))

    # -- reads -----------------------------------------------------------------------

    def unfinished(self, task: str, *, lock: str) -> list[RunRecord]:
        parameters = {"p_lock_name": lock, "p_task": task}
        driver = self._driver
        if driver is not None:
            on_driver = driver.unfinished
            return self._call(
                "reading running fires",
                lambda: [_record(row) for row in driver.path.rows(on_driver, parameters)],
            )
        query = self._statements.unfinished
        return self._call("reading running fires", lambda: self._records(query, parameters))

    def runs(
        self, task: str | None = None, limit: int = 20, *, lock: str | None = None
    ) -> list[RunRecord]:
        runs = self._table
        query = sa.select(runs).order_by(
            runs.c.instant.desc(), runs.c.task.desc(), runs.c.lock_name.desc()
        )
        if task is not None:
            query = query.where(runs.c.task == task)
        if lock is not None:
            query = query.where(runs.c.lock_name == lock)
        query = query.limit(max(limit, 0))
        return self._call("reading runs", lambda: self._records(query))

    def last_success(self, task: str, *, lock: str) -> RunRecord | None:
        runs = self._table
        query = (
            sa.select(runs)
            .where(
                runs.c.lock_name == lock,
                runs.c.task == task,
                runs.c.state == RunState.SUCCEEDED.value,
            )
            .order_by(runs.c.instant.desc())
            .limit(1)
        )
        found = self._call("reading the last success", lambda: self._records(query))
        return found[0] if found else None

    def failures_since(self, since: datetime) -> list[RunRecord]:
        runs = self._table
        query = (
            sa.select(runs)
            .where(
                runs.c.state.in_([RunState.FAILED.value, RunState.EXPIRED.value]),
                runs.c.ended_at >= as_utc(since),
            )
            .order_by(runs.c.instant.desc())
        )
        return self._call("reading failures", lambda: self._records(query))

    def close(self) -> None:
        if not self._released:
            self._released = True
            release_store_engine(self._engine)

    def __repr__(self) -> str:
        return f"DatabaseRunHistory({self._target!r}, table={self._table.name!r})"

    # -- machinery -------------------------------------------------------------------

    def _key(self, lock: str, task: str, instant: datetime) -> dict[str, Any]:
        return {"lock_name": lock, "task": task, "instant": as_utc(instant)}

    def _is(self, key: dict[str, Any]) -> sa.ColumnElement[bool]:
        columns = self._table.c
        return sa.and_(
            columns.lock_name == key["lock_name"],
            columns.task == key["task"],
            columns.instant == key["instant"],
        )

    def _inserted_if_absent(self, row: dict[str, Any]) -> bool:
        """`_insert_if_absent` in a statement of its own (a `start`, a `skip`)."""
        driver = self._driver
        if driver is not None and driver.insert_if_absent is not None:
            return bool(driver.path.rows(driver.insert_if_absent, row))
        with self._single.begin() as connection:
            return self._insert_if_absent(connection, row)

    def _insert_if_absent(self, connection: Connection, row: dict[str, Any]) -> bool:
        """Insert `row` unless its key exists; whether it was inserted.

        PostgreSQL and SQLite say so with `ON CONFLICT DO NOTHING RETURNING` (no error
        in the server log for every duplicate). MySQL's `INSERT IGNORE` would also
        swallow truncation errors, so there a duplicate is a caught IntegrityError.
        """
        statement = self._statements.insert_if_absent
        if statement is not None:
            return connection.execute(statement, row).first() is not None
        try:
            with connection.begin_nested():
                connection.execute(self._table.insert(), row)
        except IntegrityError:
            return False
        return True

    def _insert_absent_rows(self, connection: Connection, rows: list[dict[str, Any]]) -> int:
        """Insert those of `rows` (one lock and task) whose key is absent; how many.

        The statement is compiled once per store and executed for the whole list:
        SQLAlchemy and the driver send it as multi-row inserts (a statement with
        every value inline cost more CPU to build than its round trip). PostgreSQL
        and SQLite: `INSERT … ON CONFLICT DO NOTHING RETURNING`, whose rows are the
        inserted ones. MySQL has no such clause without `IGNORE` (which also swallows
        truncation): a plain insert, and only when a key exists already (another
        node wrote the same catch-up), the existing keys are read and the rest
        inserted.
        """
        runs = self._table
        many = self._statements.skip_many
        if many is not None:
            first = rows[0]
            parameters = {f"p_{name}": first[name] for name in _SKIP_MANY_SHARED}
            parameters["p_instants"] = [row["instant"] for row in rows]
            return len(connection.execute(many, parameters).all())
        statement = self._statements.insert_if_absent
        if statement is not None:
            return len(connection.execute(statement, rows).all())
        try:
            with connection.begin_nested():
                connection.execute(runs.insert(), rows)
        except IntegrityError:
            existing = set(
                connection.execute(
                    sa.select(runs.c.instant).where(
                        runs.c.lock_name == rows[0]["lock_name"],
                        runs.c.task == rows[0]["task"],
                        runs.c.instant.in_([row["instant"] for row in rows]),
                    )
                ).scalars()
            )
            absent = [row for row in rows if row["instant"] not in existing]
            if not absent:
                return 0
            if len(absent) == len(rows):
                raise  # not a duplicate key: the error is the statement's own
            return self._insert_absent_rows(connection, absent)
        return len(rows)

    def _rowcount(self, statement: sa.Executable, parameters: dict[str, Any] | None = None) -> int:
        """Run one `UPDATE` or `DELETE`, atomic on its own; how many rows it matched."""
        with self._single.begin() as connection:
            return int(connection.execute(statement, parameters).rowcount)

    def _records(
        self, query: sa.Select[Any], parameters: dict[str, Any] | None = None
    ) -> list[RunRecord]:
        with self._single.connect() as connection:
            rows = connection.execute(query, parameters).mappings().all()
        return [_record(row) for row in rows]

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
        """Create the table once per instance, or refuse an old one (`OldHistoryTable`).

        A concurrent creator elsewhere is fine. The shape is checked once, here: a
        0.1.0 table keyed by target alone would mix the fires of deployments.
        """
        with self._table_mutex:
            if self._table_ready:
                return
            try:
                self._table.metadata.create_all(self._engine, checkfirst=True)
            except DBAPIError:
                # Another node created it between our check and our CREATE.
                if not sa.inspect(self._engine).has_table(self._table.name):
                    raise
            with self._engine.connect() as connection:
                key = table_key(connection, self._table.name) or ()
            refuse_unless_current(key, table=self._table.name, where=self._target)
            self._table_ready = True


def _finished_together(
    driver: _DriverStatements, finishes: Sequence[Mapping[str, Any]]
) -> list[bool]:
    """A group of finishes (`GroupedCalls`) in one round trip, each with its own answer.

    The fires of an instant end together, in as many worker threads, and one at a
    time each finish was one round trip on PostgreSQL and two on MySQL (an `UPDATE`
    and a `COMMIT`), with the thread hand-offs around them: on MySQL most of a won
    fire's CPU (issue 12). PostgreSQL: one `UPDATE … FROM unnest(…) RETURNING`, the
    same conditions row by row. MySQL: one text of each finish's own `UPDATE` and a
    `COMMIT`, each answered by its row count. A lone finish on PostgreSQL is sent
    alone.
    """
    path = driver.path
    if len(finishes) == 1 and driver.finish_many is not None:
        [parameters] = finishes
        return [path.rowcount(driver.finish[parameters["p_token"] is None], parameters) == 1]
    if driver.finish_many is not None:
        arrays = {name: [finish[key] for finish in finishes] for name, key in _FINISH_ARRAYS}
        arrays["p_places"] = list(range(len(finishes)))
        done = {row["place"] for row in path.rows(driver.finish_many, arrays)}
        return [place in done for place in range(len(finishes))]
    sent = [(driver.finish[finish["p_token"] is None], finish) for finish in finishes]
    return [count == 1 for count in path.rowcounts_together(sent)]


#: `_finish_from_arrays`'s arrays, and the finish parameter each takes its values from.
_FINISH_ARRAYS = (
    ("p_lock_names", "p_lock_name"),
    ("p_tasks", "p_task"),
    ("p_instants", "p_instant"),
    ("p_tokens", "p_token"),
    ("p_states", "p_state"),
    ("p_ended", "p_ended_at"),
    ("p_errors", "p_error"),
)
#: How often `record_run` tries again when the row changed between its statements.
RECORD_RUN_ROUNDS = 3
#: The most finishes sent as one text (each a few hundred bytes).
FINISHES_PER_GROUP = 200

#: The columns `_skip_many_from_an_array` takes once for a whole catch-up.
_SKIP_MANY_SHARED = ("lock_name", "task", "node", "ended_at", "error")
#: Rows per multi-row insert: SQLite before 3.32 allows 999 parameters (9 per row).
_ROWS_PER_INSERT = {"sqlite": 100, "default": 1000}


def _skipped_row(
    lock: str, task: str, instant: datetime, *, node: str, reason: str, at: datetime
) -> dict[str, Any]:
    """The row of a fire nobody ran: the record `skip` and `skip_many` insert."""
    return {
        "lock_name": lock,
        "task": task,
        "instant": instant,
        "node": node,
        "attempt": 1,
        "state": RunState.SKIPPED.value,
        "started_at": None,
        "ended_at": as_utc(at),
        "error": clip_error(reason),
        "token": None,
    }


def _running_row(run: NewRun, *, node: str, at: datetime) -> dict[str, Any]:
    """The row of a new run, attempt 1: the record `start_new_many` inserts."""
    return {
        "lock_name": run.lock,
        "task": run.task,
        "instant": as_utc(run.instant),
        "node": node,
        "attempt": 1,
        "state": RunState.RUNNING.value,
        "started_at": at,
        "ended_at": None,
        "error": None,
        "token": run.token,
    }


def _fresh(
    rows: Sequence[dict[str, Any]], found: Iterable[Mapping[Any, Any]]
) -> list[dict[str, Any]]:
    """Those of `rows` (new runs) that no record in `found` stands in the way of.

    `found` holds the records of the rows' locks that are running or at one of the
    rows' fires (`_HotStatements.in_the_way`): a running record keeps its task from
    starting another run, and a record at a row's own fire keeps that row out.
    """
    busy: set[tuple[str, str]] = set()
    recorded: set[tuple[str, str, datetime]] = set()
    for record in found:
        if record["state"] == RunState.RUNNING.value:
            busy.add((record["lock_name"], record["task"]))
        recorded.add(_row_key(record))
    return [
        row
        for row in rows
        if (row["lock_name"], row["task"]) not in busy and _row_key(row) not in recorded
    ]


def _prefixed(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's values under the `p_<column>` names of the driver's insert."""
    return {f"p_{column}": value for column, value in row.items()}


def _unprefixed(row: Mapping[str, Any]) -> dict[str, Any]:
    return {column.removeprefix("p_"): value for column, value in row.items()}


def _row_key(row: Mapping[str, Any]) -> tuple[str, str, datetime]:
    return (row["lock_name"], row["task"], as_utc(row["instant"]))


def _single_statements(engine: Engine) -> Engine:
    """The engine for statements atomic on their own: in autocommit on PostgreSQL.

    A fire writes its history in single statements (an insert-if-absent, a
    conditional update) and reads it in single selects. In a transaction, psycopg
    sends each as `BEGIN`, the statement, and `COMMIT` (or the pool's rollback):
    three round trips where one does. In autocommit it sends the statement alone, and
    psycopg switches the mode client-side, without a round trip, when the pool hands
    the connection out and takes it back. Measured on PostgreSQL, one conditional
    update: 0.46 against 0.75 ms of CPU and 1.3 against 2.6 ms of wall time
    (issue 12). PyMySQL would send `SET autocommit` both ways, two round trips for
    the one it saves; MySQL and SQLite keep the transaction. Writes of several
    statements (the takeover of an existing row, a catch-up) stay transactions.
    """
    if engine.dialect.name != "postgresql":
        return engine
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def _record(row: Mapping[Any, Any]) -> RunRecord:
    return RunRecord(
        task=row["task"],
        instant=row["instant"],
        node=row["node"],
        attempt=row["attempt"],
        state=RunState(row["state"]),
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        error=row["error"],
        token=row["token"],
        lock=row["lock_name"],
    )


@dataclass(frozen=True)
class _DriverStatements:
    """The per-fire statements of `_HotStatements` that go to the driver (`history_driver`).

    PostgreSQL: all four. MySQL: the finish, the unfinished-runs read, and the
    batch start's read and insert, two statements in a transaction
    (`_started_in_two`); its single start is a caught duplicate key
    (`_insert_if_absent`), and stays with SQLAlchemy.
    """

    path: DriverPath
    finish: dict[bool, DriverStatement]
    unfinished: DriverStatement
    insert_if_absent: DriverStatement | None
    start_new_many: DriverStatement | None
    #: PostgreSQL: a group of finishes (`_finished_together`); None on MySQL.
    finish_many: DriverStatement | None
    #: MySQL: `_started_in_two`'s read, for so many lock names and instants, and its
    #: insert (`DriverPath.read_then_insert`).
    in_the_way: Callable[[int, int], DriverStatement] | None = None
    insert: DriverStatement | None = None

    @classmethod
    def for_store(cls, engine: Engine, statements: _HotStatements) -> _DriverStatements | None:
        dialect = engine.dialect.name
        if dialect not in {"postgresql", "mysql", "mariadb"}:
            return None
        postgres = dialect == "postgresql"
        insert = statements.insert_if_absent if postgres else None
        return cls(
            DriverPath(engine),
            {is_none: DriverStatement(s, engine) for is_none, s in statements.finish.items()},
            DriverStatement(statements.unfinished, engine),
            None if insert is None else DriverStatement(insert, engine),
            DriverStatement(_start_new_from_arrays(statements.runs), engine) if postgres else None,
            DriverStatement(_finish_from_arrays(statements.runs), engine) if postgres else None,
            None if postgres else _in_the_way_by_size(statements.runs, engine),
            None if postgres else DriverStatement(_insert_of_a_run(statements.runs), engine),
        )


def _key_parameters(lock: str, task: str, instant: datetime) -> dict[str, Any]:
    return {"p_lock_name": lock, "p_task": task, "p_instant": as_utc(instant)}


class _HotStatements:
    """The statements every fire sends, built once per store with bound parameters.

    Building a SQLAlchemy statement with its values inline, then its cache key, on
    every call cost more CPU than the round trip it sends (issue 12); these differ
    from the inline forms only in where the values come from. Parameters are named
    `p_<column>`: SQLAlchemy reserves a column's own name for its VALUES and SET.
    """

    def __init__(self, runs: sa.Table, dialect: str) -> None:
        self.runs = runs
        columns = runs.c
        is_key = sa.and_(
            columns.lock_name == sa.bindparam("p_lock_name"),
            columns.task == sa.bindparam("p_task"),
            columns.instant == sa.bindparam("p_instant"),
        )
        running = columns.state == RunState.RUNNING.value
        #: finish: `[token is None]`; a token-less finish matches only a token-less run.
        self.finish = {
            is_none: runs.update()
            .where(
                is_key,
                running,
                columns.token.is_(None)
                if is_none
                else sa.or_(columns.token.is_(None), columns.token <= sa.bindparam("p_token")),
            )
            .values(
                state=sa.bindparam("p_state"),
                ended_at=sa.bindparam("p_ended_at"),
                error=sa.bindparam("p_error"),
            )
            for is_none in (False, True)
        }
        self.unfinished = (
            sa.select(runs)
            .where(
                columns.lock_name == sa.bindparam("p_lock_name"),
                columns.task == sa.bindparam("p_task"),
                running,
            )
            .order_by(columns.instant)
        )
        #: `start_new_many` off PostgreSQL: the records of a batch's locks that stand in
        #: the way of a new run (a running one, or one at a fire of the batch).
        self.in_the_way = sa.select(
            columns.lock_name, columns.task, columns.instant, columns.state
        ).where(
            columns.lock_name.in_(sa.bindparam("p_lock_names", expanding=True)),
            sa.or_(running, columns.instant.in_(sa.bindparam("p_instants", expanding=True))),
        )
        #: PostgreSQL and SQLite: the insert-if-absent; None on MySQL (see the caller).
        self.insert_if_absent: sa.Insert | None = None
        if dialect in {"postgresql", "sqlite"}:
            insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
            self.insert_if_absent = insert(runs).on_conflict_do_nothing().returning(columns.task)
        #: PostgreSQL: skips of many instants of one task in one small statement.
        self.skip_many: sa.Executable | None = None
        if dialect == "postgresql":
            self.skip_many = _skip_many_from_an_array(runs)


def _in_the_way_by_size(runs: sa.Table, engine: Engine) -> Callable[[int, int], DriverStatement]:
    """`_HotStatements.in_the_way` for the driver, compiled once per pair of list sizes.

    SQLAlchemy expands a list parameter when it executes; the driver's own statement
    cannot, so each lock name and instant has a placeholder of its own
    (`p_lock_name_<i>`, `p_instant_<i>`), each decoded where its column's type says
    (`mysql_text`). A node's batches meet few sizes.
    """
    columns = runs.c

    def placeholders(column: sa.Column[Any], prefix: str, size: int) -> list[Any]:
        return [sa.bindparam(f"{prefix}_{i}", type_=column.type) for i in range(size)]

    @lru_cache(maxsize=64)
    def compiled(locks: int, instants: int) -> DriverStatement:
        statement = sa.select(columns.lock_name, columns.task, columns.instant, columns.state)
        return DriverStatement(
            statement.where(
                columns.lock_name.in_(placeholders(columns.lock_name, "p_lock_name", locks)),
                sa.or_(
                    columns.state == RunState.RUNNING.value,
                    columns.instant.in_(placeholders(columns.instant, "p_instant", instants)),
                ),
            ),
            engine,
        )

    return compiled


def _numbered(prefix: str, values: Sequence[Any]) -> dict[str, Any]:
    return {f"{prefix}_{index}": value for index, value in enumerate(values)}


def _insert_of_a_run(runs: sa.Table) -> sa.ClauseElement:
    """An `INSERT` of one row of every column, bound as `p_<column>` (`_prefixed`)."""
    return runs.insert().values(
        {column.name: sa.bindparam(f"p_{column.name}") for column in runs.c}
    )


def _skip_many_from_an_array(runs: sa.Table) -> sa.Executable:
    """`INSERT … SELECT … FROM unnest(:p_instants) ON CONFLICT DO NOTHING` (PostgreSQL).

    Every column but the instant is one value for the whole catch-up, so the
    statement carries one array instead of 9 parameters per row: psycopg parses the
    query text of a multi-row insert again on every call, which cost 0.1 ms of CPU
    per row (measured on 1,000-row catch-ups).
    """
    columns = runs.c
    catch_up = (
        sa.func.unnest(sa.bindparam("p_instants", type_=postgresql.ARRAY(UtcDateTime())))
        .table_valued("instant")
        .render_derived(name="catch_up")
    )
    rows = sa.select(
        sa.bindparam("p_lock_name", type_=columns.lock_name.type),
        sa.bindparam("p_task", type_=columns.task.type),
        catch_up.c.instant,
        sa.bindparam("p_node", type_=columns.node.type),
        sa.literal(1),
        sa.literal(RunState.SKIPPED.value),
        sa.null(),
        sa.bindparam("p_ended_at", type_=UtcDateTime()),
        sa.bindparam("p_error", type_=columns.error.type),
        sa.null(),
    )
    names = [*("lock_name", "task", "instant", "node", "attempt", "state")]
    names += ("started_at", "ended_at", "error", "token")
    insert = postgresql.insert(runs).from_select(names, rows).on_conflict_do_nothing()
    return insert.returning(columns.instant)  # the rows inserted: their number is the count


def _start_new_from_arrays(runs: sa.Table) -> sa.ClauseElement:
    """`start_new_many` on PostgreSQL: one `INSERT … SELECT … FROM unnest(…)`.

    Each fire of the batch is a row of four arrays (lock, task, instant, token); it
    is inserted, attempt 1, unless its task has a `running` record (`NOT EXISTS`)
    or its fire a record (`ON CONFLICT DO NOTHING`), and the rows it returns are
    the runs started. One round trip for the whole batch, in autocommit.
    """
    columns = runs.c
    batch = (
        sa.func.unnest(
            sa.bindparam("p_lock_names", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_tasks", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_instants", type_=postgresql.ARRAY(sa.DateTime())),
            sa.bindparam("p_tokens", type_=postgresql.ARRAY(sa.BigInteger())),
        )
        .table_valued("lock_name", "task", "instant", "token")
        .render_derived(name="batch")
    )
    other = runs.alias("other")
    busy = (
        sa.select(sa.literal(1))
        .where(
            other.c.lock_name == batch.c.lock_name,
            other.c.task == batch.c.task,
            other.c.state == RunState.RUNNING.value,
        )
        .exists()
    )
    rows = sa.select(
        batch.c.lock_name,
        batch.c.task,
        batch.c.instant,
        sa.bindparam("p_node", type_=columns.node.type),
        sa.literal(1),
        sa.literal(RunState.RUNNING.value),
        sa.bindparam("p_started_at", type_=sa.DateTime()),
        sa.null(),
        sa.null(),
        batch.c.token,
    ).where(~busy)
    names = [*("lock_name", "task", "instant", "node", "attempt", "state")]
    names += ("started_at", "ended_at", "error", "token")
    insert = postgresql.insert(runs).from_select(names, rows).on_conflict_do_nothing()
    return insert.returning(columns.lock_name, columns.task, columns.instant)


def _finish_from_arrays(runs: sa.Table) -> sa.ClauseElement:
    """A group of finishes on PostgreSQL: one `UPDATE … FROM unnest(…) RETURNING`.

    Each finish is a row of the arrays (`_FINISH_ARRAYS`, and its place in the
    group); a record is updated on the single finish's conditions (running, and a
    token no newer than the finish's, or none for a token-less one), and the places
    returned are the finishes that matched.
    """
    columns = runs.c
    done = (
        sa.func.unnest(
            sa.bindparam("p_lock_names", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_tasks", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_instants", type_=postgresql.ARRAY(sa.DateTime())),
            sa.bindparam("p_tokens", type_=postgresql.ARRAY(sa.BigInteger())),
            sa.bindparam("p_states", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_ended", type_=postgresql.ARRAY(sa.DateTime())),
            sa.bindparam("p_errors", type_=postgresql.ARRAY(sa.Text())),
            sa.bindparam("p_places", type_=postgresql.ARRAY(sa.Integer())),
        )
        .table_valued(
            "lock_name", "task", "instant", "token", "state", "ended_at", "error", "place"
        )
        .render_derived(name="done")
    )
    no_newer = sa.case(
        (done.c.token.is_(None), columns.token.is_(None)),
        else_=sa.or_(columns.token.is_(None), columns.token <= done.c.token),
    )
    return (
        runs.update()
        .where(
            columns.lock_name == done.c.lock_name,
            columns.task == done.c.task,
            columns.instant == done.c.instant,
            columns.state == RunState.RUNNING.value,
            no_newer,
        )
        .values(state=done.c.state, ended_at=done.c.ended_at, error=done.c.error)
        .returning(done.c.place)
    )


def create_history_store(url: str) -> DatabaseRunHistory:
    """The database descriptor's history-store factory; checks the table.

    Called when a host boots and by `runs`, `monitor` and `prune`: a 0.1.0 table is
    refused there, with the command that upgrades it, rather than on a fire.
    """
    store = DatabaseRunHistory(url)
    try:
        store.verify()
    except BaseException:
        store.close()
        raise
    return store
