"""What `current_fire().atomic(...)` refuses, with a clear error, before the body writes.

Each case runs a real fire (a `FireRunner`; the SQL history on a real server where
one is involved) whose body enters the block and keeps the error it meets:

* no run history, or one that cannot write through the task's connection (memory):
  `ConfigurationError` naming it;
* a connection to another database or server than the history's: `ConfigurationError`
  naming both, without the password;
* a connection of an unknown kind, a SQLAlchemy `Connection` outside `begin()`, a
  psycopg connection in autocommit outside `transaction()`: `ConfigurationError`;
* a commit inside the block, or a second block in one fire: `AtomicOutcomeError`,
  and nothing of the block committed.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pymysql
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from firefly_scheduling import ConfigurationError, InMemoryLock, current_fire
from firefly_scheduling.errors import FireflySchedulingError
from firefly_scheduling.fires.atomic import AtomicOutcomeError
from firefly_scheduling.fires.context import FireContext
from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history.memory import MemoryRunHistory
from firefly_scheduling.history.port import RunHistory
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_mysql.url import connection_arguments

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atomic_clients import app_url, place_on, sqlite_url

PASSWORD = "s3cret-not-for-logs"


def refusal(
    history: RunHistory | None, attempt: Callable[[FireContext], object]
) -> FireflySchedulingError:
    """The error `attempt(current_fire())` meets inside a real fire of a locked task."""
    met: list[FireflySchedulingError] = []

    def body() -> None:
        running = current_fire()
        assert running is not None
        try:
            attempt(running)
        except FireflySchedulingError as err:
            met.append(err)

    target = f"tests.atomic_refusals_{uuid.uuid4().hex[:10]}:job"
    descriptor = ScheduledDescriptor(target=target, lock_name=target, fixed_rate=1.0)
    instant = datetime.now(UTC).replace(microsecond=0)
    runner = FireRunner(InMemoryLock(), history=history, node="A")
    result = runner.run(Fire.at(descriptor, instant), body)
    assert len(met) == 1, f"the block was not refused: {result}"
    return met[0]


def enter_with(connection_of: Callable[[], object]) -> Callable[[FireContext], object]:
    def attempt(running: FireContext) -> None:
        with running.atomic(connection_of()):
            pass

    return attempt


def test_no_history_is_refused() -> None:
    error = refusal(None, enter_with(object))
    assert isinstance(error, ConfigurationError)
    assert "no run history" in str(error)


def test_a_memory_history_is_refused_by_name() -> None:
    error = refusal(MemoryRunHistory(), enter_with(object))
    assert isinstance(error, ConfigurationError)
    assert "MemoryRunHistory" in str(error)
    assert "cannot write through the task's connection" in str(error)


def test_another_postgres_database_is_refused_naming_both_without_the_password(
    postgres_url: str, tmp_path: Path
) -> None:
    other = make_url(app_url(postgres_url)).set(database="postgres", password=PASSWORD)
    engine = sa.create_engine(other)
    with place_on(postgres_url, tmp_path) as place:
        try:
            with Session(engine) as session:
                error = refusal(place.history, enter_with(lambda: session))
        finally:
            engine.dispose()
    assert isinstance(error, ConfigurationError)
    text = str(error)
    assert PASSWORD not in text
    assert "/postgres" in text  # the task's database
    assert f"/{make_url(postgres_url).database}" in text  # the history's


def test_a_sqlite_connection_with_a_postgres_history_is_refused(
    postgres_url: str, tmp_path: Path
) -> None:
    engine = sa.create_engine(sqlite_url(tmp_path))
    with place_on(postgres_url, tmp_path) as place:
        try:
            with engine.connect() as connection, connection.begin():
                error = refusal(place.history, enter_with(lambda: connection))
        finally:
            engine.dispose()
    assert isinstance(error, ConfigurationError)
    assert "sqlite" in str(error)
    assert "postgresql" in str(error)


def test_a_psycopg_connection_to_another_server_kind_is_refused(
    postgres_url: str, mysql_url: str, tmp_path: Path
) -> None:
    with place_on(mysql_url, tmp_path) as place, psycopg.connect(postgres_url) as connection:
        error = refusal(place.history, enter_with(lambda: connection))
    assert isinstance(error, ConfigurationError)
    assert "mysql" in str(error)
    assert "postgresql" in str(error)


def test_an_unknown_connection_kind_is_refused(mysql_url: str, tmp_path: Path) -> None:
    raw = pymysql.connect(**connection_arguments(mysql_url))
    try:
        with place_on(mysql_url, tmp_path) as place:
            error = refusal(place.history, enter_with(lambda: raw))
    finally:
        raw.close()
    assert isinstance(error, ConfigurationError)
    assert "pymysql" in str(error)


def test_psycopg_in_autocommit_outside_a_transaction_is_refused(
    postgres_url: str, tmp_path: Path
) -> None:
    with (
        place_on(postgres_url, tmp_path) as place,
        psycopg.connect(postgres_url, autocommit=True) as connection,
    ):
        error = refusal(place.history, enter_with(lambda: connection))
        assert isinstance(error, ConfigurationError)
        assert "autocommit" in str(error)


def test_a_commit_inside_the_block_is_refused_and_the_success_not_written(
    postgres_url: str, tmp_path: Path
) -> None:
    with place_on(postgres_url, tmp_path) as place:

        def attempt(running: FireContext) -> None:
            with Session(place.engine) as session, running.atomic(session):
                session.execute(sa.insert(place.app).values(fire="committed early", attempt=1))
                session.commit()

        error = refusal(place.history, attempt)
        assert isinstance(error, AtomicOutcomeError)
        assert "committed or rolled back inside it" in str(error)
        # The task's own commit stands; the fire's record is the record stage's.
        assert place.app_rows() == [{"fire": "committed early", "attempt": 1}]


def test_a_second_block_in_one_fire_is_refused(postgres_url: str, tmp_path: Path) -> None:
    with place_on(postgres_url, tmp_path) as place:

        def attempt(running: FireContext) -> None:
            for _ in range(2):
                with Session(place.engine) as session, session.begin(), running.atomic(session):
                    session.execute(
                        sa.insert(place.app).values(fire=f"block {_}", attempt=running.attempt)
                    )

        error = refusal(place.history, attempt)
        assert isinstance(error, AtomicOutcomeError)
        assert "one atomic block" in str(error)
        assert place.app_rows() == [{"fire": "block 0", "attempt": 1}]
