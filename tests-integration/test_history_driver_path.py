"""The run history's per-fire statements on the driver path (`sql_history.driver`).

A fire's three history statements (the unfinished-runs read, the start's insert and
the finish) go to the pooled psycopg connection in autocommit rather than through
SQLAlchemy's execution layer (about 0.45 against 0.2 ms of CPU each). The
contract suite covers what they do; these cover what the layer did around them:
the pool's connections go back in their transactional mode, a connection the server
dropped is a `HistoryError` without the password and the next call reconnects, and
instants come back aware UTC whatever the session's time zone. On MySQL (the finish
and the read, each followed by COMMIT, and the batch start's read and insert in one
transaction): a finish or a batch start is committed and no transaction is left
open, a batch start that meets a record written after its read starts nothing, and
a dropped connection is a `HistoryError` and then a reconnect.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import psycopg
import pymysql
import pytest
from sqlalchemy.engine import make_url

from firefly_scheduling.history import HistoryError
from firefly_scheduling.history.port import NewRun, RunState
from firefly_scheduling_database.sql_history import batch_writes
from firefly_scheduling_database.sql_history import rows as history_rows
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_mysql.url import connection_arguments

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_tables import installed_history
from grouped_senders import finishes_as_one_group

#: Counts or changes what the whole server does: runs alone under xdist.
pytestmark = pytest.mark.alone

T0 = datetime(2030, 1, 1, tzinfo=UTC)
PASSWORD = "s3cret-driver-pw"


@pytest.fixture
def store(postgres_url: str) -> Iterator[SqlRunHistory]:
    # trust authentication ignores the password; it is there to be kept out of errors
    with_password = make_url(postgres_url).set(password=PASSWORD)
    with installed_history(with_password.render_as_string(hide_password=False)) as history:
        yield history


def _pooled_backends(store: SqlRunHistory) -> list[Any]:
    """Check out every connection the store's pool holds (2), at once."""
    return [store.engine.raw_connection() for _ in range(2)]


def test_the_pool_gets_its_connections_back_in_transactional_mode(
    store: SqlRunHistory,
) -> None:
    assert store.start("app:job", T0, lock="lk", node="a", token=3, at=T0) == 1
    assert [r.instant for r in store.unfinished("app:job", lock="lk")] == [T0]
    assert store.finish(
        "app:job", T0, lock="lk", state=RunState.SUCCEEDED, at=T0, token=3, error=None
    )
    pooled = _pooled_backends(store)
    try:
        assert [p.driver_connection.autocommit for p in pooled] == [False, False]
    finally:
        for connection in pooled:
            connection.close()
    # A transaction of several statements still is one: a takeover of a skipped row.
    later = T0 + timedelta(seconds=1)
    assert store.skip("app:job", later, lock="lk", node="b", reason="late", at=later)
    assert store.start("app:job", later, lock="lk", node="a", token=4, at=later) == 1


def test_a_dropped_connection_is_a_history_error_then_the_next_call_reconnects(
    store: SqlRunHistory, postgres_url: str
) -> None:
    assert store.start("app:job", T0, lock="lk", node="a", token=1, at=T0) == 1
    pooled = _pooled_backends(store)
    pids = [p.driver_connection.info.backend_pid for p in pooled]
    for connection in pooled:
        connection.close()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    caught = _fails_once_then_reconnects(store)
    assert PASSWORD not in str(caught)


def _fails_once_then_reconnects(store: SqlRunHistory) -> HistoryError:
    """The store's connections were ended by the server: the next read fails, naming
    what it was doing; the calls after it reconnect. The failure, for its text."""
    with pytest.raises(HistoryError) as caught:
        store.unfinished("app:job", lock="lk")
    assert "reading running fires" in str(caught.value)
    # The dead connection and its idle sibling were dropped: the next calls reconnect.
    assert [r.token for r in store.unfinished("app:job", lock="lk")] == [1]
    assert store.finish(
        "app:job", T0, lock="lk", state=RunState.FAILED, at=T0, token=1, error="boom"
    )
    assert store.unfinished("app:job", lock="lk") == []
    return caught.value


def test_instants_come_back_aware_utc_whatever_the_session_time_zone(
    store: SqlRunHistory, postgres_url: str
) -> None:
    instant = datetime(2030, 6, 1, 12, 30, 0, 123456, tzinfo=UTC)
    pooled = _pooled_backends(store)
    try:
        for connection in pooled:  # a server or role whose default zone is not UTC
            connection.driver_connection.execute("SET TIME ZONE 'America/Los_Angeles'")
            connection.driver_connection.commit()
    finally:
        for connection in pooled:
            connection.close()
    started = instant + timedelta(milliseconds=5)
    assert store.start("app:tz", instant, lock="tz", node="a", token=7, at=started) == 1
    (record,) = store.unfinished("app:tz", lock="tz")
    assert record.instant == instant
    assert record.started_at == started
    assert record.instant.tzinfo is UTC
    with psycopg.connect(postgres_url, autocommit=True) as reader:
        stored = reader.execute(
            f"SELECT instant FROM {store.table.name} WHERE task = %s",
            ("app:tz",),
        ).fetchone()
    assert stored == (instant.replace(tzinfo=None),)  # naive UTC, as SQLAlchemy wrote it


# -- MySQL: the finish and the unfinished-runs read, each followed by COMMIT ---------------


@pytest.fixture
def mysql_store(mysql_url: str) -> Iterator[SqlRunHistory]:
    with installed_history(mysql_url) as history:
        yield history


def _pooled_thread_ids(store: SqlRunHistory) -> list[int]:
    """The server's ids of the store's two pooled PyMySQL connections (both checked
    out at once, then given back)."""
    pooled = [store.engine.raw_connection() for _ in range(2)]
    try:
        return [int(cast(Any, connection.driver_connection).thread_id()) for connection in pooled]
    finally:
        for connection in pooled:
            connection.close()


def _mysql_reader(mysql_url: str) -> Any:
    return pymysql.connect(**connection_arguments(mysql_url), autocommit=True)


def _open_transactions(reader: Any, thread_ids: list[int]) -> int:
    """How many transactions the server has open on the connections `thread_ids`."""
    with reader.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id IN %s",
            (tuple(thread_ids),),
        )
        [(count,)] = cursor.fetchall()
    return int(count)


def test_mysql_finish_is_committed_and_leaves_no_transaction_open(
    mysql_store: SqlRunHistory, mysql_url: str
) -> None:
    """A second client sees the finished row at once, and the server reports no open
    transaction on the store's connections after the finish and the read."""
    assert mysql_store.start("app:job", T0, lock="lk", node="a", token=3, at=T0) == 1
    # The lock name is a VARBINARY on MySQL: it comes back as the text it was.
    assert [(r.token, r.lock) for r in mysql_store.unfinished("app:job", lock="lk")] == [(3, "lk")]
    assert mysql_store.finish(
        "app:job", T0, lock="lk", state=RunState.SUCCEEDED, at=T0, token=3, error=None
    )
    ids = _pooled_thread_ids(mysql_store)
    reader = _mysql_reader(mysql_url)
    try:
        with reader.cursor() as cursor:
            cursor.execute(
                f"SELECT state FROM {mysql_store.table.name} WHERE task = %s",
                ("app:job",),
            )
            assert cursor.fetchall() == (("succeeded",),)
        assert _open_transactions(reader, ids) == 0
    finally:
        reader.close()
    # A zombie's late finish, with an older token, matches no row.
    assert not mysql_store.finish(
        "app:job", T0, lock="lk", state=RunState.FAILED, at=T0, token=2, error="late"
    )


def test_mysql_batch_start_is_committed_and_leaves_no_transaction_open(
    mysql_store: SqlRunHistory, mysql_url: str
) -> None:
    """An instant's runs started together (read and insert on the driver): a second
    client sees them running at once, and no transaction stays open."""
    runs = [NewRun(f"lk{index}", f"app:job{index}", T0, index + 1) for index in range(3)]
    assert mysql_store.start_new_many(runs, node="a", at=T0) == [True, True, True]
    ids = _pooled_thread_ids(mysql_store)
    reader = _mysql_reader(mysql_url)
    try:
        with reader.cursor() as cursor:
            cursor.execute(
                f"SELECT task, state, token, attempt FROM {mysql_store.table.name} ORDER BY task"
            )
            assert cursor.fetchall() == tuple(
                (f"app:job{index}", "running", index + 1, 1) for index in range(3)
            )
        assert _open_transactions(reader, ids) == 0
    finally:
        reader.close()
    assert [r.started_at for r in mysql_store.unfinished("app:job1", lock="lk1")] == [T0]


def test_mysql_batch_start_meeting_a_record_written_after_its_read_starts_nothing(
    mysql_store: SqlRunHistory, mysql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another node's skip lands between the batch's read and its insert: the insert
    fails on that key, and none of the batch's runs stands (a second client reads the
    table); the next start on the same pool works."""
    reader = _mysql_reader(mysql_url)
    table = mysql_store.table.name
    real_fresh = history_rows.fresh

    def fresh_then_a_skip_elsewhere(*arguments: Any) -> list[dict[str, Any]]:
        chosen = real_fresh(*arguments)
        with reader.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (lock_name, task, instant, node, attempt, state)"
                " VALUES ('lk1', 'app:job1', %s, 'other', 1, 'skipped')",
                (T0.replace(tzinfo=None),),
            )
        return chosen

    monkeypatch.setattr(batch_writes, "fresh", fresh_then_a_skip_elsewhere)
    runs = [NewRun(f"lk{index}", f"app:job{index}", T0, index + 1) for index in range(3)]
    try:
        assert mysql_store.start_new_many(runs, node="a", at=T0) == [False, False, False]
        with reader.cursor() as cursor:
            cursor.execute(f"SELECT task, node, state FROM {table}")
            assert cursor.fetchall() == (("app:job1", "other", "skipped"),)
    finally:
        reader.close()
    monkeypatch.setattr(batch_writes, "fresh", real_fresh)
    assert mysql_store.start_new_many(runs[:1], node="a", at=T0) == [True]


def test_mysql_dropped_connection_is_a_history_error_then_the_next_call_reconnects(
    mysql_store: SqlRunHistory, mysql_url: str
) -> None:
    assert mysql_store.start("app:job", T0, lock="lk", node="a", token=1, at=T0) == 1
    ids = _pooled_thread_ids(mysql_store)
    reader = _mysql_reader(mysql_url)
    try:
        with reader.cursor() as cursor:
            for thread_id in ids:
                cursor.execute("KILL %s", (thread_id,))
    finally:
        reader.close()
    _fails_once_then_reconnects(mysql_store)


def _finish_from_threads(
    store: SqlRunHistory, finishes: list[tuple[str, int]]
) -> dict[str, bool | BaseException]:
    """Finish each `(task, token)` from its own thread, all queued behind one group."""
    return finishes_as_one_group(store, finishes, at=T0)


def _states(store: SqlRunHistory, mysql_url: str) -> dict[str, str]:
    reader = _mysql_reader(mysql_url)
    try:
        with reader.cursor() as cursor:
            cursor.execute(f"SELECT task, state FROM {store.table.name}")
            return dict(cursor.fetchall())
    finally:
        reader.close()


def test_mysql_finishes_waiting_together_are_one_text_each_answered(
    mysql_store: SqlRunHistory, mysql_url: str
) -> None:
    """Twelve finishes queued together: the server's general log shows them in one
    statement text ending in COMMIT, a second client reads every row finished, and
    the one with an older token (a zombie) alone is refused."""
    tasks = [f"app:job{index}" for index in range(12)]
    for task in tasks:
        assert mysql_store.start(task, T0, lock="lk", node="a", token=5, at=T0) == 1
    reader = _mysql_reader(mysql_url)
    try:
        with reader.cursor() as cursor:
            cursor.execute("SELECT @@GLOBAL.log_output, @@GLOBAL.general_log")
            [(output, enabled)] = cursor.fetchall()
            cursor.execute("SET GLOBAL log_output = 'TABLE'")
            cursor.execute("SET GLOBAL general_log = 1")
        try:
            answers = _finish_from_threads(
                mysql_store, [(task, 4 if task == tasks[3] else 5) for task in tasks]
            )
            with reader.cursor() as cursor:
                cursor.execute(
                    "SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log"
                    " WHERE command_type = 'Query' AND argument LIKE %s",
                    (f"UPDATE {mysql_store.table.name}%",),
                )
                texts = [text for (text,) in cursor.fetchall()]
        finally:
            with reader.cursor() as cursor:
                cursor.execute("SET GLOBAL general_log = %s", (int(enabled),))
                cursor.execute("SET GLOBAL log_output = %s", (output,))
    finally:
        reader.close()
    assert answers == {task: task != tasks[3] for task in tasks}
    assert len(texts) == 1, texts
    assert texts[0].count("UPDATE ") == 12
    assert texts[0].endswith("COMMIT")
    states = _states(mysql_store, mysql_url)
    assert states == {task: "running" if task == tasks[3] else "succeeded" for task in tasks}


def test_mysql_a_group_that_fails_part_way_writes_nothing(
    mysql_store: SqlRunHistory, mysql_url: str
) -> None:
    """The middle row of a group is locked by a second client past the lock wait
    timeout: every finish of the group fails, and none is written (the first one's
    UPDATE is rolled back with the group's transaction). Sent again, they succeed."""
    tasks = ["app:first", "app:middle", "app:last"]
    for task in tasks:
        assert mysql_store.start(task, T0, lock="lk", node="a", token=1, at=T0) == 1
    blocker = pymysql.connect(**connection_arguments(mysql_url), autocommit=False)
    try:
        with blocker.cursor() as cursor:
            cursor.execute(
                f"SELECT * FROM {mysql_store.table.name} WHERE task = %s FOR UPDATE",
                ("app:middle",),
            )
        answers = _finish_from_threads(mysql_store, [(task, 1) for task in tasks])
    finally:
        blocker.rollback()
        blocker.close()
    assert all(isinstance(answer, HistoryError) for answer in answers.values()), answers
    assert "Lock wait timeout" in str(answers["app:first"])
    assert _states(mysql_store, mysql_url) == dict.fromkeys(tasks, "running")
    for task in tasks:
        assert mysql_store.finish(
            task, T0, lock="lk", state=RunState.SUCCEEDED, at=T0, token=1, error=None
        )
    assert _states(mysql_store, mysql_url) == dict.fromkeys(tasks, "succeeded")


def test_postgres_finishes_waiting_together_are_one_statement_each_answered(
    store: SqlRunHistory, postgres_url: str
) -> None:
    """Twelve finishes queued together on PostgreSQL (one `UPDATE … FROM unnest`):
    a second client reads every row finished with its own state, the zombie's (an
    older token) alone is refused, and a run started without a token is finished."""
    tasks = [f"app:job{index}" for index in range(12)]
    for task in tasks:
        token = None if task == tasks[7] else 5
        assert store.start(task, T0, lock="lk", node="a", token=token, at=T0) == 1
    answers = _finish_from_threads(store, [(task, 4 if task == tasks[3] else 5) for task in tasks])
    # tasks[7] ran without a token: a finish with one is as good as a newer holder's.
    assert answers == {task: task != tasks[3] for task in tasks}
    with psycopg.connect(postgres_url, autocommit=True) as reader:
        rows = reader.execute(f"SELECT task, state, ended_at FROM {store.table.name}").fetchall()
    states = {task: state for task, state, _ in rows}
    assert states == {task: "running" if task == tasks[3] else "succeeded" for task in tasks}
    assert {ended for task, _, ended in rows if task != tasks[3]} == {T0.replace(tzinfo=None)}
