"""The SQLite run history's finishes that wait for one another: one transaction.

The fires of an instant end together, and on SQLite each commit takes the file's
single write lock and syncs its log: one per finish put the fires behind one
another and behind the other nodes' writes. Queued finishes are sent as
one transaction, each still its own statement with its own answer. These tests read
what sqlite3 itself reports running (its trace callback on the store's connections)
and the rows through a second `sqlite3` connection:

* twelve queued finishes commit once; each row carries its own state, and a zombie's
  finish (an older token) alone is refused and leaves its row running;
* a group one of whose statements the database refuses (a trigger) writes nothing,
  and every finish of it gets the error; sent again, they succeed.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from firefly_scheduling.history import HistoryError
from firefly_scheduling.history.port import RunState
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grouped_senders import finishes_as_one_group, sqlite_statements

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "runs.sqlite")


@pytest.fixture
def statements() -> Iterator[list[str]]:
    with sqlite_statements() as seen:
        yield seen


@pytest.fixture
def store(path: str, statements: list[str]) -> Iterator[SqlRunHistory]:
    history = SqlRunHistory(f"sqlite:///{path}")
    history.install()
    try:
        yield history
    finally:
        history.close()


def _finish_from_threads(
    store: SqlRunHistory, finishes: list[tuple[str, int]], statements: list[str]
) -> dict[str, bool | BaseException]:
    """Finish each `(task, token)` as one group; `statements` then holds only what the
    group's sending ran."""
    return finishes_as_one_group(store, finishes, at=T0, before_sending=statements.clear)


def _states(path: str, table: str) -> dict[str, str]:
    with sqlite3.connect(path) as reader:
        return dict(reader.execute(f"SELECT task, state FROM {table}").fetchall())


def _started(store: SqlRunHistory, tasks: list[str], token: int) -> None:
    for task in tasks:
        assert store.start(task, T0, lock="lk", node="a", token=token, at=T0) == 1


def test_finishes_waiting_together_commit_once_each_answered(
    store: SqlRunHistory, path: str, statements: list[str]
) -> None:
    tasks = [f"app:job{index}" for index in range(12)]
    _started(store, tasks, token=5)
    answers = _finish_from_threads(
        store, [(task, 4 if task == tasks[3] else 5) for task in tasks], statements
    )
    assert answers == {task: task != tasks[3] for task in tasks}
    updates = [sql for sql in statements if sql.lstrip().upper().startswith("UPDATE")]
    commits = [sql for sql in statements if sql.strip().upper() == "COMMIT"]
    assert len(updates) == 12, statements
    assert len(commits) == 1, statements
    states = _states(path, store.table.name)
    assert states == {task: "running" if task == tasks[3] else "succeeded" for task in tasks}


def test_a_group_the_database_refuses_part_way_writes_nothing(
    store: SqlRunHistory, path: str, statements: list[str]
) -> None:
    tasks = ["app:first", "app:middle", "app:last"]
    _started(store, tasks, token=1)
    table = store.table.name
    with sqlite3.connect(path) as admin:
        admin.execute(
            f"CREATE TRIGGER refuse_middle BEFORE UPDATE ON {table} "
            "WHEN NEW.task = 'app:middle' BEGIN SELECT RAISE(ABORT, 'middle refused'); END"
        )
    answers = _finish_from_threads(store, [(task, 1) for task in tasks], statements)
    assert all(isinstance(answer, HistoryError) for answer in answers.values()), answers
    assert "middle refused" in str(answers["app:first"])
    assert _states(path, table) == dict.fromkeys(tasks, "running")
    with sqlite3.connect(path) as admin:
        admin.execute("DROP TRIGGER refuse_middle")
    for task in tasks:
        assert store.finish(
            task, T0, lock="lk", state=RunState.SUCCEEDED, at=T0, token=1, error=None
        )
    assert _states(path, table) == dict.fromkeys(tasks, "succeeded")
