"""The run history and the anchor store on MariaDB sessions that read SQL text otherwise.

The database provider's stores write lock names, tasks, nodes, error texts and
anchors that any application can choose. Each case builds the store on a URL whose
own settings change how the server reads text (`session_settings`: sql_mode
`NO_BACKSLASH_ESCAPES` or `ANSI_QUOTES`, the `gbk`, `big5` or `sjis` client
character set), writes hostile values through every write path (a start, the
grouped finishes, a batch start, skips, an anchor's add and replace), reads them
back through the store, and reads the table with a second, plain PyMySQL client on
default settings: every value is exact, and the canary table stands.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from firefly_scheduling.history.port import NewRun, RunState
from firefly_scheduling_database.anchor_store import TABLE_NAME as ANCHOR_TABLE
from firefly_scheduling_database.anchor_store import DatabaseAnchorStore
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent / "contract"))
from session_settings import MYSQL_SETTINGS, MySqlCanaryClient, with_setting

AT = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
SETTINGS = {"default": None, **MYSQL_SETTINGS}


@pytest.fixture
def server(mysql_url: str) -> Iterator[MySqlCanaryClient]:
    client = MySqlCanaryClient(mysql_url)
    yield client
    client.close()


@pytest.fixture(params=sorted(SETTINGS, key=str))
def session_url(request: pytest.FixtureRequest, mysql_url: str) -> str:
    setting = SETTINGS[request.param]
    return mysql_url if setting is None else with_setting(mysql_url, setting)


def _hostile(server: MySqlCanaryClient, what: str) -> str:
    """A value for `what` that ends a literal under the wrong escaping, in a multibyte
    set's way too, with characters no non-Unicode set can spell."""
    return f"{what} €', 0x6f); DROP TABLE {server.canary}; -- 表\\ 功' \"q\" 🔒 e\u0301"


def test_the_run_history_writes_and_reads_hostile_values_exactly(
    session_url: str, server: MySqlCanaryClient
) -> None:
    lock, task, node = (_hostile(server, what) for what in ("lock", "task", "node"))
    error = _hostile(server, "error") + "\n" + "x" * 300
    table = f"ff_runs_{uuid.uuid4().hex[:12]}"
    history = SqlRunHistory(session_url, table=table)
    try:
        assert history.start(task, AT, lock=lock, node=node, token=7, at=AT) == 1
        [running] = history.unfinished(task, lock=lock)
        assert (running.lock, running.task, running.node) == (lock, task, node)
        assert history.finish(
            task, AT, lock=lock, token=7, state=RunState.FAILED, error=error, at=AT
        )
        [failed] = history.runs(task, lock=lock)
        assert (failed.state, failed.error) == (RunState.FAILED, error)
        assert [record.task for record in history.failures_since(AT - timedelta(days=1))] == [task]

        other = task + " (batch)"
        later = AT + timedelta(minutes=1)
        assert history.start_new_many([NewRun(lock, other, later, 8)], node=node, at=later) == [
            True
        ]
        assert history.finish(
            other, later, lock=lock, token=8, state=RunState.SUCCEEDED, error=None, at=later
        )
        success = history.last_success(other, lock=lock)
        assert success is not None
        assert (success.lock, success.task, success.node) == (lock, other, node)

        skipped = task + " (skipped)"
        instants = [AT + timedelta(minutes=minute) for minute in range(3)]
        assert history.skip_many(skipped, instants, lock=lock, node=node, reason=error, at=AT) == 3

        rows = server.execute(
            f"SELECT lock_name, task, node, error FROM {table} ORDER BY task, instant"
        )
        assert [(bytes(row[0]).decode(), row[1], row[2]) for row in rows] == [
            (lock, task, node),
            (lock, other, node),
            *[(lock, skipped, node)] * 3,
        ]
        assert rows[0][3] == error
    finally:
        history.close()
        server.execute(f"DROP TABLE IF EXISTS {table}")
    assert server.canary_stands(), "a value ran as SQL and dropped the canary"


def test_the_anchor_store_writes_and_reads_hostile_values_exactly(
    session_url: str, server: MySqlCanaryClient
) -> None:
    key = f"firefly:scheduling:initial-delay:a'b\\c\"d;--{uuid.uuid4().hex[:8]}"
    first, second = _hostile(server, "first"), _hostile(server, "second")
    store = DatabaseAnchorStore(session_url)
    server_key = store.server_key(key)
    try:
        assert store.add(key, first)
        assert store.add(key, second) is False
        assert store.get(key) == first
        assert store.replace(key, first, second)
        assert store.replace(key, first, second) is False
        assert store.get(key) == second
        [(value,)] = server.execute(
            f"SELECT anchor_value FROM {ANCHOR_TABLE} WHERE anchor_key = %s",
            (server_key,),
        )
        assert value == second
    finally:
        store.close()
        server.execute(f"DELETE FROM {ANCHOR_TABLE} WHERE anchor_key = %s", (server_key,))
    assert server.canary_stands(), "a value ran as SQL and dropped the canary"
