"""What the tests of `current_fire().atomic(...)` share: a database with its run history,
the task's lock and an application table, and a second connection reading both.

A `Place` is one database (PostgreSQL, MariaDB or a SQLite file) holding a fresh run
history table and a fresh application table; its lock is a lease table in the same
database (SQLite: a file of its own, so the lock's renewals never wait on the task's
open transaction). `Place.app_rows()` and `Place.record()` read through a connection
of their own, never the task's.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url

from firefly_scheduling.fires.context import FireContext
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_tables import installed_history, installed_lease_table

#: The SQLAlchemy drivers the task's own engine uses for a test URL's scheme.
_DRIVERS = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql", "sqlite": "sqlite"}


def app_url(url: str, *, asyncio: bool = False) -> str:
    """`url` with the driver the task's own engine uses (asyncio: psycopg, aiosqlite)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    driver = _DRIVERS[backend]
    if asyncio and backend == "sqlite":
        driver = "sqlite+aiosqlite"
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


@dataclass
class Place:
    """One database: its URL, run history, lease table URL and the application's table."""

    url: str
    history: SqlRunHistory
    lock_url: str
    lock_table: str
    app: sa.Table
    engine: Engine

    def lock(self) -> DatabaseLeaseLock:
        return DatabaseLeaseLock(self.lock_url, table=self.lock_table)

    def descriptor(self, *, lock_ttl: float = 30.0) -> ScheduledDescriptor:
        target = f"tests.atomic_{uuid.uuid4().hex[:10]}:job"
        return ScheduledDescriptor(
            target=target, lock_name=target, lock_ttl=lock_ttl, fixed_rate=1.0
        )

    def app_rows(self) -> list[dict[str, Any]]:
        """The application table's rows, read through a connection of its own."""
        with self.engine.connect() as reader:
            rows = reader.execute(sa.select(self.app).order_by(self.app.c.fire)).mappings()
            return [dict(row) for row in rows]

    def record(self, target: str, instant: datetime) -> dict[str, Any]:
        """The history's row of a fire, read through a connection of its own."""
        runs = self.history.table
        with self.engine.connect() as reader:
            found = (
                reader.execute(
                    sa.select(
                        runs.c.state, runs.c.attempt, runs.c.token, runs.c.node, runs.c.ended_at
                    ).where(runs.c.task == target, runs.c.instant == instant)
                )
                .mappings()
                .all()
            )
        assert len(found) == 1, found
        return dict(found[0])


@contextmanager
def place_on(url: str, tmp_path: Path) -> Iterator[Place]:
    """A fresh history, lease table and application table on `url`'s database."""
    with ExitStack() as stack:
        history = stack.enter_context(installed_history(url))
        lock_url = url
        if make_url(url).get_backend_name() == "sqlite":
            lock_url = f"sqlite:///{tmp_path / 'locks.db'}"
        lock_table = stack.enter_context(installed_lease_table(lock_url, "atomic_leases"))
        engine = sa.create_engine(app_url(url))
        stack.callback(engine.dispose)
        app = sa.Table(
            f"atomic_app_{uuid.uuid4().hex[:10]}",
            sa.MetaData(),
            sa.Column("fire", sa.String(200), primary_key=True),
            sa.Column("attempt", sa.Integer, nullable=False),
        )
        app.create(engine)
        stack.callback(app.drop, engine)
        yield Place(url, history, lock_url, lock_table, app, engine)


class WritesSeen:
    """A real `SqlRunHistory`, and the runner's writes to it as they were answered.

    Every call goes to the store; the writes (`start`, `finish`, `record_run`) and the
    record stage's read of one record (`record_of`) are noted with their answers, so a
    test can say which the record stage sent.
    """

    WRITES = frozenset({"start", "finish", "record_of", "record_run"})

    def __init__(self, history: SqlRunHistory) -> None:
        self._history = history
        self.writes: list[tuple[str, object]] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._history, name)
        if name not in self.WRITES:
            return found

        def noted(*args: Any, **kwargs: Any) -> Any:
            answer = found(*args, **kwargs)
            self.writes.append((name, answer))
            return answer

        return noted


def adopted_by_node_b(
    adopter: SqlRunHistory, running: FireContext, token: int | None
) -> int | None:
    """Node B adopts the running fire through `adopter` (a second client of its history),
    as an adopter's start does: the record is taken over. The attempt B got (None: refused)."""
    return adopter.start(
        running.target,
        running.instant,
        lock=running.target,
        node="B",
        token=token,
        at=datetime.now(UTC),
    )


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'app.db'}"


def database_url(database: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of `database` ("postgres", "mariadb" or "sqlite", a file in `tmp_path`)."""
    if database == "sqlite":
        return sqlite_url(tmp_path)
    fixture = {"postgres": "postgres_url", "mariadb": "mysql_url"}[database]
    return str(request.getfixturevalue(fixture))
