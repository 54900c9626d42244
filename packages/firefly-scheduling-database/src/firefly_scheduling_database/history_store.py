"""`DatabaseRunHistory`: the run history in a SQL table (history-store entry point `database`).

One row per fire in `firefly_scheduling_runs`, keyed by `(task, instant)`, created on
first use, on SQLite, PostgreSQL or MySQL/MariaDB. Every write the fire runner races
on is ONE atomic statement, so the rules of `firefly_scheduling.history.port` hold
between nodes:

* `finish` is a single conditional `UPDATE … WHERE state = 'running' AND (token IS
  NULL OR token <= :token)`: a zombie's late write with an older token matches no
  row, and a finished row never matches again.
* `start` is an insert-if-absent; when the row exists, a single conditional `UPDATE`
  takes it over only from a `skipped` row or a `running` row with an older token,
  incrementing `attempt` in the same statement (its `attempt` assignment comes first,
  because MySQL evaluates `SET` assignments left to right).
* `skip` is an insert-if-absent.

Instants are stored as naive UTC with microseconds (`DATETIME(6)` on MySQL) and
read back as aware UTC. Task names compare exactly (collation "C" on PostgreSQL,
`utf8mb4_bin` on MySQL/MariaDB, whose default collations ignore case). The engine
is the database lock's (`engine.lock_engine`): bare `postgresql://` and `mysql://`
URLs get psycopg 3 and PyMySQL, and every connect, statement and row-lock wait is
bounded, so a hung server delays a fire by seconds, never forever.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.port import (
    EXPIRED_BY_PRUNE,
    FINISHED_STATES,
    HistoryError,
    RunRecord,
    RunState,
    clip_error,
)
from firefly_scheduling.instants import as_utc
from firefly_scheduling.locks.redaction import scrub
from firefly_scheduling_database.engine import describe_url, lock_engine

DEFAULT_TABLE: Final = "firefly_scheduling_runs"
# Short enough that `<table>_by_state_ended` fits PostgreSQL's 63-character limit.
_TABLE_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
_NAME_LENGTH: Final = 255
_T = TypeVar("_T")


class UtcDateTime(sa.types.TypeDecorator[datetime]):
    """An aware UTC datetime stored naive, to the microsecond, on every dialect."""

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name in {"mysql", "mariadb"}:
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(sa.DateTime(timezone=False))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _exact_name() -> sa.types.TypeEngine[str]:
    return (
        sa.String(_NAME_LENGTH)
        .with_variant(postgresql.VARCHAR(_NAME_LENGTH, collation="C"), "postgresql")
        .with_variant(
            mysql.VARCHAR(_NAME_LENGTH, charset="utf8mb4", collation="utf8mb4_bin"),
            "mysql",
            "mariadb",
        )
    )


def runs_table(name: str = DEFAULT_TABLE) -> sa.Table:
    """The history table called `name`; a `ConfigurationError` for an odd name."""
    if not isinstance(name, str) or not _TABLE_NAME.fullmatch(name):
        raise ConfigurationError(
            f"the database history store needs a plain table name (letters, digits, "
            f"underscores, at most 48 characters), got {name!r}"
        )
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("task", _exact_name(), primary_key=True),
        sa.Column("instant", UtcDateTime(), primary_key=True),
        sa.Column("node", sa.String(_NAME_LENGTH), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=True),
        sa.Column("ended_at", UtcDateTime(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("token", sa.BigInteger(), nullable=True),
        sa.Index(f"{name}_by_instant", "instant"),
        sa.Index(f"{name}_by_state_ended", "state", "ended_at"),
    )


class DatabaseRunHistory:
    """A `RunHistory` in a SQL table, shared by every node that reaches the database.

    Thread-safe (each call takes a pooled connection for one short transaction).
    Driver errors become `HistoryError`s naming the store without the password.
    """

    def __init__(self, url: str, *, table: str = DEFAULT_TABLE) -> None:
        self._table = runs_table(table)
        self._engine: Engine = lock_engine(url)
        self._target, self._secrets = describe_url(self._engine.url)
        self._dialect = self._engine.dialect.name
        self._table_ready = False
        self._table_mutex = threading.Lock()

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

    def start(
        self, task: str, instant: datetime, *, node: str, token: int | None, at: datetime
    ) -> int | None:
        key = self._key(task, instant)
        row = {
            **key,
            "node": node,
            "attempt": 1,
            "state": RunState.RUNNING.value,
            "started_at": as_utc(at),
            "ended_at": None,
            "error": None,
            "token": token,
        }
        runs = self._table
        older = sa.true() if token is None else sa.or_(runs.c.token.is_(None), runs.c.token < token)
        takeover = (
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
                (runs.c.node, node),
                (runs.c.token, token),
                (runs.c.started_at, as_utc(at)),
                (runs.c.ended_at, None),
                (runs.c.error, None),
            )
        )

        def write() -> int | None:
            with self._engine.begin() as connection:
                if self._insert_if_absent(connection, row):
                    return 1
            with self._engine.begin() as connection:
                if connection.execute(takeover).rowcount != 1:
                    return None
                # The row stays locked by our UPDATE until commit: this is our attempt.
                attempt = connection.execute(
                    sa.select(runs.c.attempt).where(self._is(key))
                ).scalar_one()
                return int(attempt)

        return self._call("starting a run", write)

    def finish(
        self,
        task: str,
        instant: datetime,
        *,
        token: int | None,
        state: RunState,
        error: str | None,
        at: datetime,
    ) -> bool:
        if state not in FINISHED_STATES:
            raise ValueError(f"finish() writes a finished state, not {state!r}")
        key = self._key(task, instant)
        runs = self._table
        not_newer = (
            runs.c.token.is_(None)
            if token is None
            else sa.or_(runs.c.token.is_(None), runs.c.token <= token)
        )
        statement = (
            runs.update()
            .where(self._is(key), runs.c.state == RunState.RUNNING.value, not_newer)
            .values(state=state.value, ended_at=as_utc(at), error=clip_error(error))
        )
        return self._call("finishing a run", lambda: self._rowcount(statement) == 1)

    def skip(self, task: str, instant: datetime, *, node: str, reason: str, at: datetime) -> bool:
        row = {
            **self._key(task, instant),
            "node": node,
            "attempt": 1,
            "state": RunState.SKIPPED.value,
            "started_at": None,
            "ended_at": as_utc(at),
            "error": clip_error(reason),
            "token": None,
        }

        def write() -> bool:
            with self._engine.begin() as connection:
                return self._insert_if_absent(connection, row)

        return self._call("recording a skip", write)

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

    def unfinished(self, task: str) -> list[RunRecord]:
        runs = self._table
        query = (
            sa.select(runs)
            .where(runs.c.task == task, runs.c.state == RunState.RUNNING.value)
            .order_by(runs.c.instant)
        )
        return self._call("reading running fires", lambda: self._records(query))

    def runs(self, task: str | None = None, limit: int = 20) -> list[RunRecord]:
        runs = self._table
        query = sa.select(runs).order_by(runs.c.instant.desc(), runs.c.task.desc())
        if task is not None:
            query = query.where(runs.c.task == task)
        query = query.limit(max(limit, 0))
        return self._call("reading runs", lambda: self._records(query))

    def last_success(self, task: str) -> RunRecord | None:
        runs = self._table
        query = (
            sa.select(runs)
            .where(runs.c.task == task, runs.c.state == RunState.SUCCEEDED.value)
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
        self._engine.dispose()

    def __repr__(self) -> str:
        return f"DatabaseRunHistory({self._target!r}, table={self._table.name!r})"

    # -- machinery -------------------------------------------------------------------

    def _key(self, task: str, instant: datetime) -> dict[str, Any]:
        return {"task": task, "instant": as_utc(instant)}

    def _is(self, key: dict[str, Any]) -> sa.ColumnElement[bool]:
        return sa.and_(self._table.c.task == key["task"], self._table.c.instant == key["instant"])

    def _insert_if_absent(self, connection: Connection, row: dict[str, Any]) -> bool:
        """Insert `row` unless its key exists; whether it was inserted.

        PostgreSQL and SQLite say so with `ON CONFLICT DO NOTHING RETURNING` (no error
        in the server log for every duplicate). MySQL's `INSERT IGNORE` would also
        swallow truncation errors, so there a duplicate is a caught IntegrityError.
        """
        runs = self._table
        if self._dialect in {"postgresql", "sqlite"}:
            insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
            statement = insert(runs).values(row).on_conflict_do_nothing().returning(runs.c.task)
            return connection.execute(statement).first() is not None
        try:
            with connection.begin_nested():
                connection.execute(runs.insert().values(row))
        except IntegrityError:
            return False
        return True

    def _rowcount(self, statement: sa.Executable) -> int:
        with self._engine.begin() as connection:
            return int(connection.execute(statement).rowcount)

    def _records(self, query: sa.Select[Any]) -> list[RunRecord]:
        with self._engine.connect() as connection:
            rows = connection.execute(query).mappings().all()
        return [
            RunRecord(
                task=row["task"],
                instant=row["instant"],
                node=row["node"],
                attempt=row["attempt"],
                state=RunState(row["state"]),
                started_at=row["started_at"],
                ended_at=row["ended_at"],
                error=row["error"],
                token=row["token"],
            )
            for row in rows
        ]

    def _call(self, doing: str, operation: Callable[[], _T]) -> _T:
        try:
            self._ensure_table()
            return operation()
        except (SQLAlchemyError, OSError) as err:
            detail = err.orig if isinstance(err, DBAPIError) and err.orig is not None else err
            text = scrub(str(detail), self._secrets) or "no detail"
            raise HistoryError(
                f"database history store {self._target} failed while {doing}: "
                f"{type(detail).__name__}: {text}"
            ) from err

    def _ensure_table(self) -> None:
        """Create the table once per instance; a concurrent creator elsewhere is fine."""
        with self._table_mutex:
            if self._table_ready:
                return
            try:
                self._table.metadata.create_all(self._engine, checkfirst=True)
            except DBAPIError:
                # Another node created it between our check and our CREATE.
                if not sa.inspect(self._engine).has_table(self._table.name):
                    raise
            self._table_ready = True


def create_history_store(url: str) -> DatabaseRunHistory:
    """Entry point of the `firefly_scheduling.history_stores` group."""
    return DatabaseRunHistory(url)
