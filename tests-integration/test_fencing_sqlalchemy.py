"""`fenced_update` and `afenced_update` on real PostgreSQL, MariaDB/MySQL and SQLite.

Every outcome is read back by a second connection (another engine), never by the
one that wrote: a refused write must leave the committed row as it was, and an
accepted one must have stored its token beside the value.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    Engine,
    Table,
    create_engine,
    select,
)
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import DeclarativeBase, Session

from firefly_scheduling.fencing import FencingTokenError, afenced_update, fenced_update
from firefly_scheduling.fires.context import FireContext, entered

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_tables import fenced_table
from threads_together import run_together

SERVERS = ["postgres", "mysql", "sqlite"]


@dataclass(frozen=True)
class Database:
    """One database: its sync and asyncio URLs and a table made for this test."""

    url: str
    async_url: str
    table: Table
    engine: Engine

    def row(self, row_id: int = 1) -> tuple[str | None, int | None]:
        """The committed value and token, read through a fresh connection."""
        reader = create_engine(self.url)
        try:
            with reader.connect() as connection:
                found = connection.execute(
                    select(self.table.c.value, self.table.c.fence_token).where(
                        self.table.c.id == row_id
                    )
                ).one()
            return found[0], found[1]
        finally:
            reader.dispose()


def _urls(server: str, request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    if server == "postgres":
        url = request.getfixturevalue("postgres_url")
        tail = url.split("://", 1)[1]
        return f"postgresql+psycopg://{tail}", f"postgresql+psycopg://{tail}"
    if server == "mysql":
        tail = request.getfixturevalue("mysql_url").split("://", 1)[1]
        return f"mysql+pymysql://{tail}", f"mysql+asyncmy://{tail}"
    path = tmp_path / "fenced.db"
    return f"sqlite:///{path}", f"sqlite+aiosqlite:///{path}"


@pytest.fixture(params=SERVERS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    url, async_url = _urls(request.param, request, tmp_path)
    with fenced_table(url, "fenced", "value", {1: "initial", 2: "other"}) as table:
        engine = create_engine(url)
        try:
            yield Database(url, async_url, table, engine)
        finally:
            engine.dispose()


def _write(database: Database, value: str, token: Any, **options: Any) -> bool:
    with database.engine.begin() as connection:
        table = database.table
        return fenced_update(connection, table, table.c.id == 1, {"value": value}, token, **options)


def test_newer_and_equal_tokens_write_an_older_one_is_refused(database: Database) -> None:
    assert database.row() == ("initial", None)
    assert _write(database, "five", 5)  # a NULL fence takes any token, and stores it
    assert database.row() == ("five", 5)
    assert _write(database, "five again", 5)  # equal: the adopted fire and its own
    assert database.row() == ("five again", 5)
    assert _write(database, "five again", 5)  # same value and token: still "written"
    assert _write(database, "seven", 7)
    assert database.row() == ("seven", 7)
    assert not _write(database, "six", 6)
    assert database.row() == ("seven", 7)
    assert not _write(database, "zero", 0)
    assert database.row() == ("seven", 7)
    assert database.row(2) == ("other", None)  # `where` chose the row


def test_a_session_writes_in_its_transaction_and_a_rollback_leaves_nothing(
    database: Database,
) -> None:
    table = database.table
    with Session(database.engine) as session:
        assert fenced_update(session, table, table.c.id == 1, {"value": "kept"}, 3)
        session.commit()
    assert database.row() == ("kept", 3)
    with Session(database.engine) as session:
        assert fenced_update(session, table, table.c.id == 1, {"value": "undone"}, 9)
        session.rollback()
    assert database.row() == ("kept", 3)
    with Session(database.engine) as session:
        assert not fenced_update(session, table, table.c.id == 1, {"value": "stale"}, 2)
        session.commit()
    assert database.row() == ("kept", 3)


def test_a_named_fence_column_and_no_matching_row(database: Database) -> None:
    table = database.table
    with database.engine.begin() as connection:
        connection.execute(table.update().values(fence_token=None))
    assert _write(database, "named", 4, column="fence_token")
    assert database.row() == ("named", 4)
    with database.engine.begin() as connection:
        assert not fenced_update(connection, table, table.c.id == 99, {"value": "x"}, 8)


def test_a_declarative_model_stands_for_its_table(database: Database) -> None:
    class Base(DeclarativeBase):
        pass

    class Account(Base):
        __table__ = database.table

    with Session(database.engine) as session:
        written = fenced_update(session, Account, database.table.c.id == 1, {"value": "mapped"}, 4)
        session.commit()
    assert written
    assert database.row() == ("mapped", 4)


def test_the_asyncio_flavour_on_a_connection_and_a_session(database: Database) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession  # noqa: PLC0415 - asyncio-only import

    table = database.table

    async def scenario() -> list[bool]:
        engine = create_async_engine(database.async_url)
        try:
            async with engine.begin() as connection:
                first = await afenced_update(connection, table, table.c.id == 1, {"value": "a"}, 10)
            async with AsyncSession(engine) as session:
                equal = await afenced_update(session, table, table.c.id == 1, {"value": "b"}, 10)
                await session.commit()
            async with engine.begin() as connection:
                older = await afenced_update(connection, table, table.c.id == 1, {"value": "c"}, 9)
            return [first, equal, older]
        finally:
            await engine.dispose()

    assert asyncio.run(scenario()) == [True, True, False]
    assert database.row() == ("b", 10)


def test_concurrent_writers_with_interleaved_tokens_leave_the_highest_tokens_value(
    database: Database,
) -> None:
    """Six threads, each on its own connection, write 60 tokens in a shuffled order.

    Whatever the interleaving, the row ends with the highest token and its value,
    and that write reported written; a writer blocked behind a newer uncommitted
    token is refused when it gets the row.
    """
    tokens = list(range(1, 61))
    random.Random(20261207).shuffle(tokens)
    shares = [tokens[n::6] for n in range(6)]
    results: dict[int, bool] = {}
    table = database.table
    engine = create_engine(database.url, pool_size=len(shares))

    def writer(share: list[int]) -> None:
        for token in share:
            with engine.begin() as connection:
                results[token] = fenced_update(
                    connection, table, table.c.id == 1, {"value": f"v{token}"}, token
                )

    errors = run_together(writer, shares)
    engine.dispose()
    assert errors == []
    assert results[60] is True
    assert database.row() == ("v60", 60)
    assert any(not written for written in results.values()), "no write was ever refused"


def test_bad_input_is_refused_naming_it_and_nothing_is_written(database: Database) -> None:
    table = database.table
    cases: list[tuple[dict[str, Any], str]] = [
        ({"token": None}, "the fencing token is None (called outside a fire"),
        ({"token": True}, "must be an int, got True (bool)"),
        ({"token": "7"}, "must be an int, got '7' (str)"),
        ({"token": 7.0}, "must be an int, got 7.0 (float)"),
        ({"token": -1}, "between 0 and 9223372036854775807, got -1"),
        ({"token": 2**63}, f"got {2**63}"),
        ({"token": 5, "column": "fence token; drop"}, "plain identifier"),
        ({"token": 5, "column": "missing"}, "has no fence column 'missing'"),
        ({"token": 5, "values": {"fence_token": 1}}, "'fence_token' is the fence column"),
        ({"token": 5, "values": {"nope": 1}}, "has no column 'nope'"),
        ({"token": 5, "where": None}, "`where` must be a SQLAlchemy clause"),
        ({"token": 5, "where": "id = 1"}, "`where` must be a SQLAlchemy clause"),
    ]
    for case, message in cases:
        token = case.pop("token")
        values = case.pop("values", {"value": "bad"})
        where = case.pop("where", table.c.id == 1)
        with (
            pytest.raises(FencingTokenError, match=r"^fenced_update: ") as raised,
            database.engine.begin() as connection,
        ):
            fenced_update(connection, table, where, values, token, **case)
        assert message in str(raised.value)
        assert isinstance(raised.value, ValueError)
    with (
        pytest.raises(FencingTokenError, match="Table or a mapped class"),
        database.engine.begin() as connection,
    ):
        fenced_update(connection, "accounts", table.c.id == 1, {}, 5)  # type: ignore[arg-type]
    assert database.row() == ("initial", None)


def test_a_none_token_inside_a_fire_names_the_task_and_its_lock(database: Database) -> None:
    table = database.table
    fire = FireContext(
        target="shop.tasks:settle",
        instant=datetime(2030, 1, 1, tzinfo=UTC),
        attempt=1,
        token=None,
        node="n1",
        lock_name="shop.settle",
    )
    with (
        entered(fire),
        database.engine.begin() as connection,
        pytest.raises(FencingTokenError) as raised,
    ):
        fenced_update(connection, table, table.c.id == 1, {"value": "x"}, fire.token)
    assert "task 'shop.tasks:settle' holds lock 'shop.settle'" in str(raised.value)
    assert "without fencing tokens" in str(raised.value)
    unlocked = FireContext(
        target="shop.tasks:tidy",
        instant=fire.instant,
        attempt=1,
        token=None,
        node="n1",
        lock_name=None,
    )
    with (
        entered(unlocked),
        database.engine.begin() as connection,
        pytest.raises(FencingTokenError, match=r"task 'shop\.tasks:tidy' runs unlocked"),
    ):
        fenced_update(connection, table, table.c.id == 1, {"value": "x"}, None)
    assert database.row() == ("initial", None)
