"""The database lock's releases that wait for one another go to PostgreSQL as one statement.

A resident node ends the fires of an instant together, so their lease releases queue
for the lock's sender (`GroupedCalls`); whoever sends next deletes every waiting
lease in ONE statement and reads each answer from the rows it deleted. These tests
make 12 releases wait (the test holds the sender's mutex), then read the server:

* a statement-level trigger on the lease table, with its transition table, records
  how many rows each DELETE statement removed: one statement for the 12;
* a second client sees the 12 rows gone, and a lease of another owner on a name of
  the group left alone;
* a holding whose lease lapsed and was taken by another node is answered "not
  released" (marked lost) while the others of its group are released.

Both flavours: threads on the synchronous lock, tasks on the asyncio one.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import psycopg
import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_database.engine import lock_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grouped_senders import fresh_names, held, one_lapsed_among_held, send_as_one_group

COUNT = 12


@dataclass(frozen=True)
class _Audited:
    """A private lease table whose DELETE statements a trigger records."""

    table: str
    audit: str


@pytest.fixture
def audited(postgres_url: str) -> Iterator[_Audited]:
    tag = uuid.uuid4().hex[:12]
    table, audit, function = f"ff_rel_{tag}", f"ff_rel_audit_{tag}", f"ff_rel_count_{tag}"
    installer = DatabaseLeaseLock(postgres_url, table=table)
    installer.install()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {audit} (deleted int NOT NULL)")
        admin.execute(
            f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN INSERT INTO {audit} SELECT count(*) FROM gone; RETURN NULL; END $$"
        )
        admin.execute(
            f"CREATE TRIGGER {function} AFTER DELETE ON {table} REFERENCING OLD TABLE AS gone "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()"
        )
    yield _Audited(table, audit)
    engine = lock_engine(postgres_url)
    for created in installer.tables.all:
        created.drop(engine, checkfirst=True)
    engine.dispose()
    installer.close()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"DROP TABLE IF EXISTS {audit}")
        admin.execute(f"DROP FUNCTION IF EXISTS {function}()")


def _deletes(postgres_url: str, audited: _Audited) -> list[int]:
    """Rows removed by each DELETE statement on the lease table so far, by the trigger."""
    with psycopg.connect(postgres_url) as reader:
        return [row[0] for row in reader.execute(f"SELECT deleted FROM {audited.audit}")]


def _holders(postgres_url: str, audited: _Audited, names: list[str]) -> dict[str, str]:
    with psycopg.connect(postgres_url) as reader:
        rows = reader.execute(
            f"SELECT name, locked_by FROM {audited.table} WHERE name = ANY(%s)",
            (names,),
        ).fetchall()
    return dict(rows)


def test_waiting_releases_are_one_delete_each_answered(
    postgres_url: str, audited: _Audited
) -> None:
    lock = DatabaseLeaseLock(postgres_url, table=audited.table)
    other = DatabaseLeaseLock(postgres_url, table=audited.table)
    try:
        names = fresh_names("releases-sync", COUNT)
        lapsed, _, holdings = one_lapsed_among_held(lock, other, names)
        releases = lock._releases.grouped
        assert releases is not None
        everything = [lapsed, *holdings]
        send_as_one_group(
            releases, [partial(lock.release_holding, holding) for holding in everything]
        )
        assert _deletes(postgres_url, audited) == [COUNT - 1]
        assert lapsed.lost
        assert not any(holding.lost for holding in holdings)
        holders = _holders(postgres_url, audited, names)
        assert list(holders) == [names[0]], "every released lease is gone; the other's stays"
        assert holders[names[0]] != lapsed.owner
    finally:
        lock.close()
        other.close()


def test_a_lone_release_is_its_own_statement(postgres_url: str, audited: _Audited) -> None:
    lock = DatabaseLeaseLock(postgres_url, table=audited.table)
    try:
        [name] = fresh_names("releases-lone", COUNT)[:1]
        holding = lock.acquire(name, 30)
        assert isinstance(holding, Holding)
        lock.release_holding(holding)
        assert _deletes(postgres_url, audited) == [1]
        assert not holding.lost
        assert _holders(postgres_url, audited, [name]) == {}
    finally:
        lock.close()


def test_waiting_releases_of_asyncio_tasks_are_one_delete(
    postgres_url: str, audited: _Audited
) -> None:
    names = fresh_names("releases-aio", COUNT)

    async def scenario() -> list[Holding]:
        lock = AsyncDatabaseLeaseLock(postgres_url, table=audited.table)
        try:
            holdings = held(await lock.acquire_many([(name, 30) for name in names]))
            releases = lock._releases.grouped
            assert releases is not None
            await releases._sender.acquire()
            tasks = [asyncio.create_task(lock.release_holding(holding)) for holding in holdings]
            try:
                deadline = time.monotonic() + 10
                while len(releases._queue) < COUNT:
                    assert time.monotonic() < deadline, "the releases never queued"
                    await asyncio.sleep(0.01)
            finally:
                releases._sender.release()
            await asyncio.gather(*tasks)
            return holdings
        finally:
            await lock.aclose()

    holdings = asyncio.run(scenario())
    assert _deletes(postgres_url, audited) == [COUNT]
    assert not any(holding.lost for holding in holdings)
    assert _holders(postgres_url, audited, names) == {}
