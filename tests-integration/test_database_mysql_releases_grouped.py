"""The database lock's releases that wait for one another go to MariaDB as one text.

A resident node ends the fires of an instant together, so their lease releases queue
for the lock's sender (`GroupedCalls`). MySQL has no `DELETE ... RETURNING`, so the
group goes as ONE multi-statement text: an owner-checked DELETE per lease, each
answered by its own affected-row count (one DELETE per release was 18 % of
a winning MariaDB node's CPU). These tests make the releases wait (the test holds
the sender's mutex), then read the server, never the lock:

* the server's general log (`log_output = TABLE`) lists every query it received on
  the test's private lease table: ONE query for the 12 releases, holding 12 DELETEs;
* a second plain PyMySQL connection reads the table: the released rows are gone,
  and the row of a lease another node took over (the first holding lapsed) stays,
  that holding answered "not released" while the others of its group are released;
* a BEFORE DELETE trigger that SIGNALs for one name of a group fails that text: every
  caller of the group gets the error, no lease of the group is deleted (the text is
  one transaction), no transaction stays open on the server, and the same server
  connection then carries the next releases.

Both flavours: threads on the synchronous lock (PyMySQL), tasks on the asyncio one
(asyncmy). Where a lock does not group (the code before this change), the calls are
made at once all the same, so that the server's view is what fails, not the setup.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pymysql
import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_mysql.url import connection_arguments

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grouped_senders import fresh_names, held, one_lapsed_among_held, send_as_one_group

#: Counts or changes what the whole server does: runs alone under xdist.
pytestmark = pytest.mark.alone

COUNT = 12
#: The message of the test trigger's SIGNAL, which every caller of the failed group sees.
REFUSED = "release refused by the test trigger"


@dataclass(frozen=True)
class _Query:
    """One query the server received, from its general log."""

    thread_id: int
    text: str


class _Server:
    """A plain PyMySQL client of the test: reads the table and the general log."""

    def __init__(self, url: str, table: str) -> None:
        self.table = table
        self._connection = pymysql.connect(**connection_arguments(url), autocommit=True)

    def close(self) -> None:
        self._connection.close()

    def execute(self, sql: str, arguments: object = None) -> list[tuple[Any, ...]]:
        with self._connection.cursor() as cursor:
            cursor.execute(sql, arguments)
            return list(cursor.fetchall())

    def holders(self, names: Sequence[str]) -> dict[str, str]:
        """`name -> locked_by` of each of `names` with a row."""
        rows = self.execute(
            f"SELECT name, locked_by FROM {self.table} WHERE name IN %s",
            ([name.encode() for name in names],),
        )
        return {bytes(name).decode(): owner for name, owner in rows}

    def deletes(self) -> list[_Query]:
        """Every query the general log holds that deletes from the test's table."""
        rows = self.execute(
            "SELECT thread_id, CONVERT(argument USING utf8mb4) FROM mysql.general_log"
            " WHERE command_type = 'Query' AND thread_id <> CONNECTION_ID()"
            " AND argument LIKE %s ORDER BY event_time",
            (f"%DELETE FROM {self.table} %",),
        )
        return [_Query(int(thread), str(text)) for thread, text in rows]

    def open_transactions(self, thread_id: int) -> int:
        """InnoDB transactions the server connection `thread_id` has open."""
        rows = self.execute(
            "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = %s",
            (thread_id,),
        )
        return int(rows[0][0])

    @contextmanager
    def general_log(self) -> Iterator[None]:
        """The server logs every query it receives to `mysql.general_log` meanwhile."""
        [(output, enabled)] = self.execute("SELECT @@GLOBAL.log_output, @@GLOBAL.general_log")
        self.execute("SET GLOBAL log_output = 'TABLE'")
        self.execute("SET GLOBAL general_log = 1")
        try:
            yield
        finally:
            self.execute("SET GLOBAL general_log = %s", (int(enabled),))
            self.execute("SET GLOBAL log_output = %s", (output,))


@pytest.fixture
def server(mysql_url: str) -> Iterator[_Server]:
    """A private lease table, and the test's own client on it, logging every query."""
    table = f"ff_mrel_{uuid.uuid4().hex[:12]}"
    installer = DatabaseLeaseLock(mysql_url, table=table)
    installer.install()
    client = _Server(mysql_url, table)
    try:
        with client.general_log():
            yield client
    finally:
        client.close()
        engine = lock_engine(mysql_url)
        for created in installer.tables.all:
            created.drop(engine, checkfirst=True)  # its trigger goes with it
        engine.dispose()
        installer.close()


def _refuse_deleting(server: _Server, name: str) -> None:
    """A trigger that fails any DELETE of `name`'s lease row with SQLSTATE 45000."""
    server.execute(
        f"CREATE TRIGGER {server.table}_refuse BEFORE DELETE ON {server.table} FOR EACH ROW "
        f"IF OLD.name = %s THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{REFUSED}'; END IF",
        (name.encode(),),
    )


def _allow_deleting(server: _Server) -> None:
    server.execute(f"DROP TRIGGER {server.table}_refuse")


def _as_one_group(lock: DatabaseLeaseLock, calls: Sequence[Callable[[], object]]) -> None:
    """`calls` queued behind the lock's release sender, then sent as one group.

    A lock without grouped releases gets the calls from threads all at once instead.
    """
    releases = lock._releases.grouped
    if releases is not None:
        send_as_one_group(releases, calls)
        return
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)


async def _as_one_async_group(
    lock: AsyncDatabaseLeaseLock, calls: Sequence[Callable[[], Coroutine[Any, Any, object]]]
) -> None:
    """`_as_one_group` for asyncio tasks."""
    releases = lock._releases.grouped
    if releases is None:
        await asyncio.gather(*(call() for call in calls))
        return
    await releases._sender.acquire()
    try:
        tasks = [asyncio.create_task(call()) for call in calls]
        deadline = time.monotonic() + 10
        while len(releases._queue) < len(calls):
            assert time.monotonic() < deadline, f"{len(releases._queue)} of {len(calls)} queued"
            await asyncio.sleep(0.005)
    finally:
        releases._sender.release()
    await asyncio.gather(*tasks)


def _one_text_of_deletes(server: _Server, count: int) -> _Query:
    """The only query that deleted from the table: a text of `count` DELETEs."""
    deletes = server.deletes()
    assert len(deletes) == 1, (
        f"{len(deletes)} queries deleted from the lease table, expected 1 text: "
        + " | ".join(query.text[:120] for query in deletes)
    )
    [text] = deletes
    assert text.text.count(f"DELETE FROM {server.table} ") == count, text.text
    return text


def _caught(outcomes: dict[str, object], name: str, call: Callable[[], object]) -> None:
    """`call()`'s answer, or the exception it raised, as `outcomes[name]`."""
    try:
        outcomes[name] = call()
    except Exception as err:  # noqa: BLE001 - the test reads every caller's outcome
        outcomes[name] = err


def test_twelve_queued_releases_are_one_text_each_answered(mysql_url: str, server: _Server) -> None:
    """12 releases in one query; the lapsed one answers False and its taker's row stays."""
    lock = DatabaseLeaseLock(mysql_url, table=server.table)
    other = DatabaseLeaseLock(mysql_url, table=server.table)
    try:
        names = fresh_names("mysql-releases-sync", COUNT)
        lapsed, taken, holdings = one_lapsed_among_held(lock, other, names)
        everything = [lapsed, *holdings]
        _as_one_group(lock, [partial(lock.release_holding, holding) for holding in everything])
        _one_text_of_deletes(server, COUNT)
        assert lapsed.lost, "the lease another node took is answered 'not released'"
        assert not any(holding.lost for holding in holdings)
        assert server.holders(names) == {names[0]: taken.owner}
    finally:
        lock.close()
        other.close()


def test_a_lone_release_is_a_single_delete(mysql_url: str, server: _Server) -> None:
    lock = DatabaseLeaseLock(mysql_url, table=server.table)
    try:
        name = fresh_names("mysql-releases-lone", COUNT)[0]
        holding = lock.acquire(name, 30)
        assert isinstance(holding, Holding)
        lock.release_holding(holding)
        [query] = server.deletes()
        assert query.text.count("DELETE") == 1, query.text
        assert "START TRANSACTION" not in query.text
        assert not holding.lost
        assert server.holders([name]) == {}
    finally:
        lock.close()


def test_a_failing_statement_fails_the_whole_group_and_the_connection_goes_on(
    mysql_url: str, server: _Server
) -> None:
    """Every caller gets the trigger's error, nothing of the group is deleted, and the
    same server connection (one pooled: max_connections=2) carries the next releases."""
    lock = DatabaseLeaseLock(mysql_url, table=server.table, max_connections=2)
    try:
        names = fresh_names("mysql-releases-fails", COUNT)
        holdings = dict(zip(names, held(lock.acquire_many([(n, 30) for n in names])), strict=True))
        _refuse_deleting(server, names[5])
        outcomes: dict[str, object] = {}
        calls = [
            partial(_caught, outcomes, name, partial(lock._release, name, holding.owner))
            for name, holding in holdings.items()
        ]
        _as_one_group(lock, calls)
        failed = _one_text_of_deletes(server, COUNT)
        errors = [outcome for outcome in outcomes.values() if isinstance(outcome, Exception)]
        assert len(errors) == COUNT, f"every caller gets the group's error: {outcomes}"
        assert all(REFUSED in str(error) for error in errors), errors
        assert server.holders(names) == {n: h.owner for n, h in holdings.items()}, (
            "a group that failed deleted none of its leases"
        )
        assert server.open_transactions(failed.thread_id) == 0
        _allow_deleting(server)
        lock.release_holding(holdings[names[0]])  # alone
        _as_one_group(lock, [partial(lock.release_holding, holdings[n]) for n in names[1:]])
        assert server.holders(names) == {}
        assert not any(holding.lost for holding in holdings.values())
        threads = {query.thread_id for query in server.deletes()}
        assert threads == {failed.thread_id}, "the failed text's connection was reused"
    finally:
        lock.close()


def test_queued_releases_of_asyncio_tasks_are_one_text(mysql_url: str, server: _Server) -> None:
    names = fresh_names("mysql-releases-aio", COUNT)

    async def scenario() -> list[Holding]:
        lock = AsyncDatabaseLeaseLock(mysql_url, table=server.table)
        try:
            holdings = held(await lock.acquire_many([(name, 30) for name in names]))
            await _as_one_async_group(
                lock, [partial(lock.release_holding, holding) for holding in holdings]
            )
            return holdings
        finally:
            await lock.aclose()

    holdings = asyncio.run(scenario())
    _one_text_of_deletes(server, COUNT)
    assert not any(holding.lost for holding in holdings)
    assert server.holders(names) == {}


def test_a_failing_statement_fails_every_asyncio_caller_and_the_connection_goes_on(
    mysql_url: str, server: _Server
) -> None:
    names = fresh_names("mysql-releases-aio-fails", COUNT)

    async def scenario() -> dict[str, object]:
        lock = AsyncDatabaseLeaseLock(mysql_url, table=server.table, max_connections=2)
        try:
            won = held(await lock.acquire_many([(name, 30) for name in names]))
            holdings = dict(zip(names, won, strict=True))
            _refuse_deleting(server, names[-1])
            outcomes: dict[str, object] = {}

            async def release(name: str) -> None:
                try:
                    outcomes[name] = await lock._release(name, holdings[name].owner)
                except Exception as err:  # noqa: BLE001 - each caller's outcome is read
                    outcomes[name] = err

            await _as_one_async_group(lock, [partial(release, name) for name in names])
            assert server.holders(names) == {n: h.owner for n, h in holdings.items()}
            _allow_deleting(server)
            await _as_one_async_group(
                lock, [partial(lock.release_holding, holdings[n]) for n in names]
            )
            assert not any(holding.lost for holding in won)
            return outcomes
        finally:
            await lock.aclose()

    outcomes = asyncio.run(scenario())
    errors = [outcome for outcome in outcomes.values() if isinstance(outcome, Exception)]
    assert len(errors) == COUNT, f"every caller gets the group's error: {outcomes}"
    assert all(REFUSED in str(error) for error in errors), errors
    assert server.holders(names) == {}
    failed, after = server.deletes()
    assert failed.text.count("DELETE FROM") == after.text.count("DELETE FROM") == COUNT
    assert failed.thread_id == after.thread_id, "the failed text's connection was reused"
    assert server.open_transactions(failed.thread_id) == 0
