"""The reads of the SQL run history: a fire's unfinished runs, and the operators' reads.

`SqlRunHistory` (`store`) extends this class with the writes. The reads change
nothing, so none of them races: each is one `SELECT` on a pooled connection, in
autocommit where the store's single statements are (`statements.single_statements`).
A fire's own read, its task's unfinished runs, goes to the driver on PostgreSQL and
MySQL (`driver`); `runs`, `monitor` and the catch-up read through SQLAlchemy
(`queries`).
"""

from __future__ import annotations

from collections.abc import Set
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from firefly_scheduling.history.port import RunRecord, RunState
from firefly_scheduling.schedule.instants import as_utc
from firefly_scheduling_database.sql_history import queries
from firefly_scheduling_database.sql_history.rows import record
from firefly_scheduling_database.sql_history.statements import key_parameters
from firefly_scheduling_database.sql_history.table_access import SqlTableAccess


class SqlHistoryReads(SqlTableAccess):
    """Every read of a SQL run history; thread-safe, each on a pooled connection."""

    def unfinished(self, task: str, *, lock: str) -> list[RunRecord]:
        parameters = {"p_lock_name": lock, "p_task": task}
        driver = self._driver
        if driver is not None:
            on_driver = driver.unfinished
            return self._call(
                "reading running fires",
                lambda: [record(row) for row in driver.path.rows(on_driver, parameters)],
            )
        query = self._statements.unfinished
        return self._call("reading running fires", lambda: self._records(query, parameters))

    def record_of(self, task: str, instant: datetime, *, lock: str) -> RunRecord | None:
        """`RecordReadingHistory`: the fire's record, in one statement."""
        parameters = key_parameters(lock, task, instant)
        query = self._statements.record
        found = self._call("reading a run's record", lambda: self._records(query, parameters))
        return found[0] if found else None

    def runs(
        self, task: str | None = None, limit: int = 20, *, lock: str | None = None
    ) -> list[RunRecord]:
        query = queries.newest(self._table, task, limit, lock=lock)
        return self._call("reading runs", lambda: self._records(query))

    def last_success(self, task: str, *, lock: str) -> RunRecord | None:
        query = queries.last_success(self._table, task, lock=lock)
        found = self._call("reading the last success", lambda: self._records(query))
        return found[0] if found else None

    def recorded_instants(
        self,
        task: str,
        *,
        lock: str,
        after: datetime,
        until: datetime,
        states: Set[RunState] | None = None,
    ) -> set[datetime]:
        query = queries.instants_between(
            self._table, task, lock=lock, after=after, until=until, states=states
        )

        def read() -> set[datetime]:
            with self._single.connect() as connection:
                return {as_utc(instant) for instant in connection.execute(query).scalars()}

        return self._call("reading recorded instants", read)

    def records_between(
        self, task: str, *, lock: str, after: datetime, until: datetime, states: Set[RunState]
    ) -> list[RunRecord]:
        query = queries.records_between(
            self._table, task, lock=lock, after=after, until=until, states=states
        )
        return self._call("reading records", lambda: self._records(query))

    def failures_since(self, since: datetime) -> list[RunRecord]:
        query = queries.failures_since(self._table, since)
        return self._call("reading failures", lambda: self._records(query))

    def _records(
        self, query: sa.Select[Any], parameters: dict[str, Any] | None = None
    ) -> list[RunRecord]:
        with self._single.connect() as connection:
            rows = connection.execute(query, parameters).mappings().all()
        return [record(row) for row in rows]
