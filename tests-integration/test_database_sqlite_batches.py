"""The database lock's batches on SQLite: a few statements for a whole batch.

A resident node claims the fires of an instant together, takes the task locks of the
ones it won together, and ends them together. On SQLite each statement
takes the file's single write lock, so one statement per name put every fire behind
the other nodes' writes. These tests count the statements sqlite3 itself reports
running (its trace callback, set on every connection the lock's pool opens) and read
the rows back through a second `sqlite3` connection:

* a fenced batch is one upsert and one fence statement, whatever its size, and each
  row carries its holding's owner token and fence; a name held elsewhere is neither
  taken nor counted;
* releases waiting for one another are one delete, each answered on its own: a lease
  that lapsed and was taken by another lock is answered "lost" and left alone;
* a batch longer than one statement allows is sent in parts, and every name is taken.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.protocol.sqlite import SqliteLeaseBatches

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grouped_senders import fresh_names, one_lapsed_among_held, send_as_one_group, sqlite_statements

LOCKS = "firefly_scheduling_locks"
FENCES = "firefly_scheduling_locks_fences"


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'locks.sqlite'}"
    installer = DatabaseLeaseLock(url)
    installer.install()
    installer.close()
    return str(tmp_path / "locks.sqlite")


@pytest.fixture
def locks(database: str) -> Iterator[tuple[DatabaseLeaseLock, DatabaseLeaseLock]]:
    """Two nodes' locks on the database, closed after the case."""
    lock, other = (
        DatabaseLeaseLock(f"sqlite:///{database}"),
        DatabaseLeaseLock(f"sqlite:///{database}"),
    )
    yield lock, other
    other.close()
    lock.close()


@pytest.fixture
def statements() -> Iterator[list[str]]:
    with sqlite_statements() as seen:
        yield seen


def _count(statements: list[str], start: str) -> int:
    return sum(1 for sql in statements if sql.lstrip().upper().startswith(start))


def _rows(path: str, names: list[str]) -> dict[str, tuple[str, int | None]]:
    """`name: (locked_by, fence)` of each lease row of `names`, read by a second client."""
    marks = ", ".join("?" * len(names))
    with sqlite3.connect(path) as reader:
        found = reader.execute(
            f"SELECT l.name, l.locked_by, f.value FROM {LOCKS} AS l "
            f"LEFT JOIN {FENCES} AS f ON f.name = l.name WHERE l.name IN ({marks})",
            names,
        ).fetchall()
    return {name: (owner, fence) for name, owner, fence in found}


def test_a_fenced_batch_is_two_statements_and_each_row_its_holdings(
    database: str, locks: tuple[DatabaseLeaseLock, DatabaseLeaseLock], statements: list[str]
) -> None:
    lock, other = locks
    assert lock.batch_acquires
    names = fresh_names("batch-fenced", 5)
    assert other.try_acquire(names[2], 30)
    statements.clear()
    holdings = lock.acquire_many([(name, 30) for name in names], fenced=True)
    # A new connection's setup (pragmas) aside, the batch is its two inserts.
    sent = [sql for sql in statements if not sql.upper().startswith("PRAGMA")]
    assert _count(sent, "INSERT") == len(sent) == 2, sent
    assert holdings[2] is None, holdings
    won = [holding for holding in holdings if isinstance(holding, Holding)]
    assert [holding.name for holding in won] == [*names[:2], *names[3:]]
    rows = _rows(database, names)
    for holding in won:
        assert rows[holding.name] == (holding.owner, holding.fence), holding
        assert holding.fence is not None
    assert rows[names[2]][1] is None, "a lease not won was counted"
    assert rows[names[2]][0] != won[0].owner
    again = lock.acquire_many([(names[0], 30)], fenced=True)
    assert again == [None], "a held name was taken again"


def test_waiting_releases_are_one_delete_each_answered(
    database: str, locks: tuple[DatabaseLeaseLock, DatabaseLeaseLock], statements: list[str]
) -> None:
    lock, other = locks
    names = fresh_names("batch-releases", 12)
    lapsed, _, holdings = one_lapsed_among_held(lock, other, names)
    releases = lock._releases.grouped
    assert releases is not None
    everything = [lapsed, *holdings]
    send_as_one_group(
        releases,
        [partial(lock.release_holding, holding) for holding in everything],
        before_sending=statements.clear,
    )
    assert _count(statements, "DELETE") == 1, statements
    assert lapsed.lost
    assert not any(holding.lost for holding in holdings)
    rows = _rows(database, names)
    assert list(rows) == [names[0]], "every released lease is gone; the other's stays"
    assert rows[names[0]][0] != lapsed.owner


def test_a_batch_longer_than_a_statement_is_sent_in_parts_and_takes_every_name(
    database: str, statements: list[str]
) -> None:
    most = SqliteLeaseBatches.most_per_statement
    assert most is not None
    lock = DatabaseLeaseLock(f"sqlite:///{database}")
    try:
        names = fresh_names("batch-long", 2 * most + 1)
        statements.clear()
        holdings = lock.acquire_many([(name, 30) for name in names], fenced=True)
        assert _count(statements, "INSERT") == 2 * 3, len(statements)
        assert all(isinstance(holding, Holding) for holding in holdings)
        rows = _rows(database, names)
        assert len(rows) == len(names)
        tokens = {
            holding.name: (holding.owner, holding.fence)
            for holding in holdings
            if isinstance(holding, Holding)
        }
        assert rows == tokens
    finally:
        lock.close()
