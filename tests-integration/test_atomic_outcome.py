"""`current_fire().atomic(...)` on real servers: the outcome commits with the task's writes.

For each blocking client (a SQLAlchemy `Session`, a SQLAlchemy `Connection` inside
`begin()`, a psycopg 3 connection on PostgreSQL, inside `transaction()` or committed
after the block) and each database (PostgreSQL, MariaDB, a SQLite file), a real
`FireRunner` with a lease lock and the SQL history in that database runs a body whose
application row is written inside the block. A second connection then reads the
application table and the history:

* committed: the row and the `succeeded` record both stand; the record stage read the
  record once and wrote nothing over it (the body raises after the block, and the
  record still says `succeeded`, ended inside the block; the fire ends `succeeded`);
* the block raising: neither stands (the record says `failed`, written by the record
  stage as usual);
* the transaction rolled back after the block: neither stands; the record stage's
  read finds the record `running`, and `record_run` closes it `failed`;
* a stale run (a second history client adopts the fire inside the block, as an
  adopter's start does, with a newer token): `StaleFireError` naming the fire, the
  application row absent, the adopter's record untouched; without fencing tokens
  (`NoneLock`), the attempt alone fences it;
* the block adds exactly one statement to the task's transaction.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from firefly_scheduling import NoneLock, current_fire
from firefly_scheduling.fires.atomic import StaleFireError
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history.port import Recorded, RunRecord, RunState
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atomic_clients import Place, WritesSeen, adopted_by_node_b, database_url, place_on

#: A client's transaction: yields what `atomic` takes, and how to insert an app row.
Client = Callable[[Place], AbstractContextManager[tuple[object, Callable[[str, int], None]]]]


@contextmanager
def in_a_session(place: Place) -> Iterator[tuple[object, Callable[[str, int], None]]]:
    with Session(place.engine) as session, session.begin():

        def insert(fire: str, attempt: int) -> None:
            session.execute(sa.insert(place.app).values(fire=fire, attempt=attempt))

        yield session, insert


@contextmanager
def on_a_connection(place: Place) -> Iterator[tuple[object, Callable[[str, int], None]]]:
    with place.engine.connect() as connection, connection.begin():

        def insert(fire: str, attempt: int) -> None:
            connection.execute(sa.insert(place.app).values(fire=fire, attempt=attempt))

        yield connection, insert


@contextmanager
def on_psycopg(place: Place) -> Iterator[tuple[object, Callable[[str, int], None]]]:
    with psycopg.connect(place.url) as connection, connection.transaction():

        def insert(fire: str, attempt: int) -> None:
            connection.execute(
                f"INSERT INTO {place.app.name} (fire, attempt) VALUES (%s, %s)",
                (fire, attempt),
            )

        yield connection, insert


@contextmanager
def on_psycopg_committed_after(place: Place) -> Iterator[tuple[object, Callable[[str, int], None]]]:
    """psycopg without `transaction()`: the connection's block commits at its end (or
    rolls back on an error), after `atomic`'s."""
    with psycopg.connect(place.url) as connection:

        def insert(fire: str, attempt: int) -> None:
            connection.execute(
                f"INSERT INTO {place.app.name} (fire, attempt) VALUES (%s, %s)",
                (fire, attempt),
            )

        yield connection, insert


CLIENTS: dict[str, Client] = {
    "session": in_a_session,
    "connection": on_a_connection,
    "psycopg": on_psycopg,
    "psycopg_plain": on_psycopg_committed_after,
}
#: The databases each client runs on (psycopg: PostgreSQL only).
CASES = [
    (database, client)
    for database in ("postgres", "mariadb", "sqlite")
    for client in CLIENTS
    if not client.startswith("psycopg") or database == "postgres"
]


@pytest.fixture(params=CASES, ids=[f"{d}-{c}" for d, c in CASES])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Place, Client]]:
    database, client = request.param
    url = database_url(database, request, tmp_path)
    with place_on(url, tmp_path) as place:
        yield place, CLIENTS[client]


def a_fire(place: Place) -> tuple[Fire, str]:
    descriptor = place.descriptor()
    instant = datetime.now(UTC).replace(microsecond=0)
    return Fire.at(descriptor, instant), descriptor.target


def run_seen(place: Place, fire: Fire, body: Callable[[], None]) -> tuple[FireResult, WritesSeen]:
    """Run `fire` on node A, its history writes and reads noted."""
    lock, seen = place.lock(), WritesSeen(place.history)
    try:
        return FireRunner(lock, history=seen, node="A").run(fire, body), seen
    finally:
        lock.close()


def test_a_committed_block_leaves_the_row_and_the_success_and_nothing_overwrites_them(
    case: tuple[Place, Client],
) -> None:
    place, client = case
    fire, target = a_fire(place)
    after_the_block: list[datetime] = []

    def body() -> None:
        running = current_fire()
        assert running is not None
        with client(place) as (handle, insert), running.atomic(handle):
            insert(running.idempotency_key, running.attempt)
        after_the_block.append(datetime.now(UTC))
        # The fire is done; the body failing now must not change its record.
        raise RuntimeError("after the commit")

    result, seen = run_seen(place, fire, body)
    # The fire is done: what the body did after its block does not make it a failure.
    assert result.verdict is Verdict.SUCCEEDED
    assert result.error is None
    assert not result.fenced
    # The record stage sent no finish and no `record_run`: one read found the record
    # finished by this run.
    assert [name for name, _ in seen.writes] == ["start", "record_of"]
    found = seen.writes[-1][1]
    assert isinstance(found, RunRecord)
    assert (found.state, found.attempt, found.token) == (RunState.SUCCEEDED, 1, result.token)
    assert place.app_rows() == [{"fire": f"{target}@{fire.instant.isoformat()}", "attempt": 1}]
    record = place.record(target, fire.instant)
    assert record["state"] == "succeeded"
    assert record["attempt"] == 1
    assert record["token"] == result.token
    assert record["node"] == "A"
    # Ended inside the block: the record stage did not write the failed end over it.
    assert record["ended_at"] <= after_the_block[0]


def test_a_block_that_raises_leaves_neither_the_row_nor_the_success(
    case: tuple[Place, Client],
) -> None:
    place, client = case
    fire, target = a_fire(place)

    def body() -> None:
        running = current_fire()
        assert running is not None
        with client(place) as (handle, insert), running.atomic(handle):
            insert(running.idempotency_key, running.attempt)
            raise ValueError("the task changed its mind")

    lock = place.lock()
    try:
        result = FireRunner(lock, history=place.history, node="A").run(fire, body)
    finally:
        lock.close()
    assert result.verdict is Verdict.FAILED
    assert place.app_rows() == []
    assert place.record(target, fire.instant)["state"] == "failed"


def test_a_block_whose_transaction_rolls_back_after_it_is_recorded_as_the_body_ended(
    case: tuple[Place, Client],
) -> None:
    """The block wrote the success, then the task's transaction rolled back: the record
    stage's read finds the record still `running`, and `record_run` closes it with the
    body's end (here failed: the body raised)."""
    place, client = case
    fire, target = a_fire(place)

    def body() -> None:
        running = current_fire()
        assert running is not None
        with client(place) as (handle, insert):
            with running.atomic(handle):
                insert(running.idempotency_key, running.attempt)
            raise ValueError("the task rolls its transaction back after the block")

    result, seen = run_seen(place, fire, body)
    assert result.verdict is Verdict.FAILED
    assert [name for name, _ in seen.writes] == ["start", "record_of", "record_run"]
    assert seen.writes[-1][1] is Recorded.WRITTEN
    assert place.app_rows() == []
    record = place.record(target, fire.instant)
    assert (record["state"], record["attempt"]) == ("failed", 1)


def test_a_stale_run_gets_an_error_and_its_writes_roll_back(
    case: tuple[Place, Client],
) -> None:
    place, client = case
    fire, target = a_fire(place)
    raised: list[BaseException] = []
    adopter = SqlRunHistory(place.url, table=place.history.table.name)

    def body() -> None:
        running = current_fire()
        assert running is not None
        assert running.token is not None  # the lease lock is fenced
        try:
            with client(place) as (handle, insert), running.atomic(handle):
                # Another node adopts the fire, with a newer token.
                assert adopted_by_node_b(adopter, running, token=running.token + 1) == 2
                insert(running.idempotency_key, running.attempt)
        except StaleFireError as err:
            raised.append(err)
            raise

    lock = place.lock()
    try:
        result = FireRunner(lock, history=place.history, node="A").run(fire, body)
    finally:
        lock.close()
        adopter.close()
    [error] = raised
    assert isinstance(error, StaleFireError)
    for part in (target, fire.instant.isoformat(), "attempt 1", f"token {result.token}"):
        assert part in str(error)
    assert place.app_rows() == []
    record = place.record(target, fire.instant)
    assert (record["state"], record["attempt"], record["node"]) == ("running", 2, "B")
    assert result.fenced  # the record stage's finish is refused too


def test_the_block_refuses_a_connection_outside_a_transaction(
    postgres_url: str, tmp_path: Path
) -> None:
    with place_on(postgres_url, tmp_path) as place:
        fire, _ = a_fire(place)
        errors: list[str] = []

        def body() -> None:
            running = current_fire()
            assert running is not None
            with place.engine.connect() as connection:
                try:
                    with running.atomic(connection):
                        pass
                except ValueError as err:
                    errors.append(str(err))

        lock = place.lock()
        try:
            FireRunner(lock, history=place.history, node="A").run(fire, body)
        finally:
            lock.close()
        assert errors
        assert "outside a transaction" in errors[0]


@pytest.mark.parametrize("database", ["postgres", "mariadb", "sqlite"])
def test_the_block_adds_one_statement_to_the_task_transaction(
    database: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with place_on(database_url(database, request, tmp_path), tmp_path) as place:
        fire, _ = a_fire(place)
        sent: list[str] = []

        def noted(_conn: object, _cursor: object, statement: str, *_: object) -> None:
            sent.append(statement)

        def body() -> None:
            running = current_fire()
            assert running is not None
            sa.event.listen(place.engine, "before_cursor_execute", noted)
            try:
                with Session(place.engine) as session, session.begin(), running.atomic(session):
                    session.execute(sa.insert(place.app).values(fire="one", attempt=1))
            finally:
                sa.event.remove(place.engine, "before_cursor_execute", noted)

        lock = place.lock()
        try:
            FireRunner(lock, history=place.history, node="A").run(fire, body)
        finally:
            lock.close()
        # The task's INSERT, then the guarded UPDATE of the history's row: nothing else.
        assert [statement.split()[0] for statement in sent] == ["INSERT", "UPDATE"]
        assert place.app.name in sent[0]
        assert place.history.table.name in sent[1]


def test_a_run_without_a_token_is_fenced_by_its_attempt(postgres_url: str, tmp_path: Path) -> None:
    """A lock without fencing tokens (`NoneLock`): the adopter's start takes the record
    over as attempt 2 with no token either, and only the attempt tells the runs apart."""
    with place_on(postgres_url, tmp_path) as place:
        fire, target = a_fire(place)
        raised: list[StaleFireError] = []
        adopter = SqlRunHistory(place.url, table=place.history.table.name)

        def body() -> None:
            running = current_fire()
            assert running is not None
            assert running.token is None
            try:
                with in_a_session(place) as (session, insert), running.atomic(session):
                    assert adopted_by_node_b(adopter, running, token=None) == 2
                    insert(running.idempotency_key, running.attempt)
            except StaleFireError as err:
                raised.append(err)

        try:
            FireRunner(NoneLock(), history=place.history, node="A").run(fire, body)
        finally:
            adopter.close()
        assert len(raised) == 1
        assert "token None" in str(raised[0])
        assert place.app_rows() == []
        record = place.record(target, fire.instant)
        assert (record["attempt"], record["node"]) == (2, "B")
