"""`async with current_fire().atomic(...)` on real servers, under the asyncio runner.

The asyncio twin of `test_atomic_outcome.py`: an `AsyncFireRunner` with an asyncio
lease lock and the SQL history runs a coroutine body whose application row is
written inside `async with current_fire().atomic(...)`, with an `AsyncSession`, an
`AsyncConnection` inside `begin()` (PostgreSQL through psycopg's asyncio flavour, and
SQLite through aiosqlite) or a psycopg `AsyncConnection` (PostgreSQL). A second
connection reads both tables: committed, both stand and the record stage sent no
finish (one read found the success); raised, neither; stale (adopted inside the
block), `StaleFireError` and no row. A blocking `with` over an asyncio connection is
refused.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine

from firefly_scheduling import ConfigurationError, current_fire
from firefly_scheduling.fires.atomic import StaleFireError
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.history.port import RunRecord, RunState
from firefly_scheduling_database import AsyncDatabaseLeaseLock
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atomic_clients import Place, WritesSeen, adopted_by_node_b, app_url, place_on, sqlite_url

Insert = Callable[[str, int], object]
Client = Callable[[Place, AsyncEngine], AbstractAsyncContextManager[tuple[object, Insert]]]


@asynccontextmanager
async def in_a_session(place: Place, engine: AsyncEngine) -> AsyncIterator[tuple[object, Insert]]:
    async with AsyncSession(engine) as session, session.begin():

        async def insert(fire: str, attempt: int) -> None:
            await session.execute(sa.insert(place.app).values(fire=fire, attempt=attempt))

        yield session, insert


@asynccontextmanager
async def on_a_connection(
    place: Place, engine: AsyncEngine
) -> AsyncIterator[tuple[object, Insert]]:
    async with engine.connect() as connection, connection.begin():

        async def insert(fire: str, attempt: int) -> None:
            await connection.execute(sa.insert(place.app).values(fire=fire, attempt=attempt))

        yield connection, insert


@asynccontextmanager
async def on_psycopg(place: Place, engine: AsyncEngine) -> AsyncIterator[tuple[object, Insert]]:
    connection = await psycopg.AsyncConnection.connect(place.url)
    try:
        async with connection.transaction():

            async def insert(fire: str, attempt: int) -> None:
                await connection.execute(
                    f"INSERT INTO {place.app.name} (fire, attempt) VALUES (%s, %s)",
                    (fire, attempt),
                )

            yield connection, insert
    finally:
        await connection.close()


CLIENTS: dict[str, Client] = {
    "session": in_a_session,
    "connection": on_a_connection,
    "psycopg": on_psycopg,
}
CASES = [
    (database, client)
    for database in ("postgres", "sqlite")
    for client in CLIENTS
    if client != "psycopg" or database == "postgres"
]


@pytest.fixture(params=CASES, ids=[f"{d}-{c}" for d, c in CASES])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Place, Client]]:
    database, client = request.param
    url = (
        request.getfixturevalue("postgres_url") if database == "postgres" else sqlite_url(tmp_path)
    )
    with place_on(url, tmp_path) as place:
        yield place, CLIENTS[client]


async def run_fire(
    place: Place, history: object, body: Callable[[AsyncEngine], object]
) -> tuple[Fire, object]:
    descriptor = place.descriptor()
    fire = Fire.at(descriptor, datetime.now(UTC).replace(microsecond=0))
    engine = create_async_engine(app_url(place.url, asyncio=True))
    lock = AsyncDatabaseLeaseLock(place.lock_url, table=place.lock_table)
    runner = AsyncFireRunner(lock, history=history, node="A")  # type: ignore[arg-type]

    async def bound() -> None:
        await body(engine)  # type: ignore[misc]

    try:
        return fire, await runner.run(fire, bound)
    finally:
        await lock.aclose()
        await engine.dispose()


def test_a_committed_block_leaves_the_row_and_the_success(
    case: tuple[Place, Client],
) -> None:
    asyncio.run(_a_committed_block_leaves_the_row_and_the_success(case))


async def _a_committed_block_leaves_the_row_and_the_success(
    case: tuple[Place, Client],
) -> None:
    place, client = case
    seen = WritesSeen(place.history)

    async def body(engine: AsyncEngine) -> None:
        running = current_fire()
        assert running is not None
        async with client(place, engine) as (handle, insert), running.atomic(handle):
            await insert(running.idempotency_key, running.attempt)  # type: ignore[misc]

    fire, result = await run_fire(place, seen, body)
    assert result.verdict is Verdict.SUCCEEDED  # type: ignore[attr-defined]
    target = fire.target
    assert place.app_rows() == [{"fire": f"{target}@{fire.instant.isoformat()}", "attempt": 1}]
    assert place.record(target, fire.instant)["state"] == "succeeded"
    # One read of the record found the success committed: no finish, no `record_run`.
    assert [name for name, _ in seen.writes] == ["start", "record_of"]
    found = seen.writes[-1][1]
    assert isinstance(found, RunRecord)
    assert (found.state, found.attempt) == (RunState.SUCCEEDED, 1)


def test_a_block_that_raises_leaves_neither(case: tuple[Place, Client]) -> None:
    asyncio.run(_a_block_that_raises_leaves_neither(case))


async def _a_block_that_raises_leaves_neither(case: tuple[Place, Client]) -> None:
    place, client = case

    async def body(engine: AsyncEngine) -> None:
        running = current_fire()
        assert running is not None
        async with client(place, engine) as (handle, insert), running.atomic(handle):
            await insert(running.idempotency_key, running.attempt)  # type: ignore[misc]
            raise ValueError("the task changed its mind")

    fire, result = await run_fire(place, place.history, body)
    assert result.verdict is Verdict.FAILED  # type: ignore[attr-defined]
    assert place.app_rows() == []
    assert place.record(fire.target, fire.instant)["state"] == "failed"


def test_a_stale_run_gets_an_error_and_no_row(case: tuple[Place, Client]) -> None:
    asyncio.run(_a_stale_run_gets_an_error_and_no_row(case))


async def _a_stale_run_gets_an_error_and_no_row(case: tuple[Place, Client]) -> None:
    place, client = case
    raised: list[BaseException] = []
    adopter = SqlRunHistory(place.url, table=place.history.table.name)

    async def body(engine: AsyncEngine) -> None:
        running = current_fire()
        assert running is not None
        assert running.token is not None
        try:
            async with client(place, engine) as (handle, insert), running.atomic(handle):
                assert adopted_by_node_b(adopter, running, token=running.token + 1) == 2
                await insert(running.idempotency_key, running.attempt)  # type: ignore[misc]
        except StaleFireError as err:
            raised.append(err)
            raise

    try:
        fire, _ = await run_fire(place, place.history, body)
    finally:
        adopter.close()
    assert len(raised) == 1
    assert place.app_rows() == []
    record = place.record(fire.target, fire.instant)
    assert (record["state"], record["attempt"], record["node"]) == ("running", 2, "B")


def test_a_blocking_with_over_an_asyncio_session_is_refused(
    postgres_url: str, tmp_path: Path
) -> None:
    asyncio.run(_a_blocking_with_over_an_asyncio_session_is_refused(postgres_url, tmp_path))


async def _a_blocking_with_over_an_asyncio_session_is_refused(
    postgres_url: str, tmp_path: Path
) -> None:
    with place_on(postgres_url, tmp_path) as place:
        errors: list[str] = []

        async def body(engine: AsyncEngine) -> None:
            running = current_fire()
            assert running is not None
            async with AsyncSession(engine) as session:
                with pytest.raises(ConfigurationError) as refused, running.atomic(session):
                    pass
                errors.append(str(refused.value))

        await run_fire(place, place.history, body)
        assert errors
        assert "use `async with`" in errors[0]
