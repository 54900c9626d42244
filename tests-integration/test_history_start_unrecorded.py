"""A run whose history `start` failed is recorded whole when it ends.

A Redis task lock and a MariaDB run history: a second client holds `LOCK TABLES …
WRITE` on the history table while the fire starts, so the node's reads and its
`start` time out; the body runs (and unlocks the table). Before, the node then
logged a refused finish, reported `fenced=True` (a zombie signal with no newer
attempt anywhere) and the table held no record of the run. Now the end writes the
whole record, start and end, read back here by a second client.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pymysql
import pytest

from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_redis import RedisLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_tables import installed_history, mysql_client

#: The history's reply deadline here, instead of its default 5 s: the same timeout, sooner.
READ_TIMEOUT_SECONDS = 2


@pytest.fixture
def history(mysql_url: str) -> Iterator[SqlRunHistory]:
    with installed_history(mysql_url, read_timeout=READ_TIMEOUT_SECONDS) as store:
        yield store


def rows_of(mysql_url: str, table: str) -> list[dict[str, Any]]:
    """The history table as a client other than the node's reads it."""
    reader = mysql_client(mysql_url)
    try:
        with reader.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(
                f"SELECT task, node, attempt, state, started_at, ended_at, token FROM `{table}`"
            )
            return list(cursor.fetchall())
    finally:
        reader.close()


def test_a_run_whose_start_timed_out_is_recorded_whole_and_not_fenced(
    mysql_url: str,
    redis_url: str,
    history: SqlRunHistory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="firefly_scheduling")
    target = f"tests.unrecorded_{uuid.uuid4().hex}:job"
    descriptor = ScheduledDescriptor(
        target=target, lock_name=target, lock_ttl=30.0, fixed_rate=60.0
    )
    instant = datetime.now(UTC).replace(microsecond=0)
    blocker = mysql_client(mysql_url)
    ran: list[datetime] = []

    def body() -> None:
        ran.append(datetime.now(UTC))
        blocker.query("UNLOCK TABLES")  # the table is free again while the body runs

    lock = RedisLock(redis_url)
    runner = FireRunner(lock, history=history, node="n1")
    try:
        blocker.query(f"LOCK TABLES `{history.table.name}` WRITE")
        outcome = runner.run(Fire.at(descriptor, instant), body)
    finally:
        blocker.close()
        runner.close()
        lock.close()

    assert ran, "the body did not run"
    assert "runs unrecorded" in caplog.text, "the start did not time out: no defect reproduced"
    assert outcome.verdict is Verdict.SUCCEEDED
    assert outcome.fenced is False, "fenced reported with no newer attempt"
    assert "refused" not in caplog.text
    [row] = rows_of(mysql_url, history.table.name)
    assert (row["task"], row["node"], row["attempt"], row["state"]) == (
        target,
        "n1",
        1,
        "succeeded",
    )
    assert row["token"] == outcome.token
    assert row["started_at"] is not None
    assert row["ended_at"] is not None
    assert row["started_at"] <= row["ended_at"]
