"""An adoption whose start the history cannot record is not run.

An adoption takes no claim: the died run's record, taken over under the newer
token, is all that tells the next node the fire was run again. Before, a node whose
adoption start failed ran the body anyway, "recorded whole at its end"; when that
end did not land either (its task lock lost meanwhile), the record still said
attempt 1 `running`, and the next holder of the task lock adopted the fire again:
the body ran twice, both times as attempt 2 (the fault checker, a MariaDB setup).

Here a Redis task lock and a MariaDB run history hold a died run (attempt 1,
`running`). A second client locks that record's row (`SELECT … FOR UPDATE`), so
the node's non-locking read of its task's running records succeeds, and its start
of the adoption waits on the row until its read timeout. The node must not run the
died fire; its own next fire still runs. A second client then reads the record:
still attempt 1, `running`, for the next fire to adopt.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pymysql
import pytest

from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.locks.holding import Holding
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


def record_of(mysql_url: str, table: str, target: str, instant: datetime) -> dict[str, Any]:
    reader = mysql_client(mysql_url)
    try:
        with reader.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(
                f"SELECT node, attempt, state FROM `{table}` WHERE task = %s AND instant = %s",
                (target, instant.replace(tzinfo=None)),
            )
            [row] = cursor.fetchall()
            return dict(row)
    finally:
        reader.close()


def test_an_adoption_whose_start_fails_is_not_run(
    mysql_url: str, redis_url: str, history: SqlRunHistory
) -> None:
    target = f"tests.adoption_{uuid.uuid4().hex}:job"
    descriptor = ScheduledDescriptor(target=target, lock_name=target, lock_ttl=30.0, fixed_rate=1.0)
    died_at = datetime.now(UTC).replace(microsecond=0)
    lock = RedisLock(redis_url)
    # The died run: attempt 1, `running`, under the task lock's first token.
    died = lock.acquire(target, 30.0, fenced=True)
    assert isinstance(died, Holding)
    history.start(target, died_at, lock=target, node="died", token=died.fence, at=died_at)
    lock.release_holding(died)

    blocker = mysql_client(mysql_url)
    ran: list[datetime] = []
    runner = FireRunner(lock, history=history, node="n1")
    try:
        blocker.begin()
        with blocker.cursor() as cursor:
            cursor.execute(
                # The whole primary key: that row alone is locked, not the next fire's gap.
                f"SELECT attempt FROM `{history.table.name}` "
                "WHERE lock_name = %s AND task = %s AND instant = %s FOR UPDATE",
                (target, target, died_at.replace(tzinfo=None)),
            )
        fire = Fire.at(descriptor, died_at + timedelta(seconds=1))

        def body() -> None:
            running = current_fire()
            assert running is not None
            ran.append(running.instant)

        outcome = runner.run(fire, body)
    finally:
        blocker.rollback()
        blocker.close()
        runner.close()
        lock.close()

    assert ran == [fire.instant], f"the died fire ran unrecorded: {ran}"
    [adoption] = outcome.adopted
    assert adoption.fire.instant == died_at
    assert adoption.verdict is Verdict.BACKEND_ERROR
    assert adoption.error is not None
    assert "could not record attempt 2" in adoption.error
    assert outcome.verdict is Verdict.SUCCEEDED
    assert record_of(mysql_url, history.table.name, target, died_at) == {
        "node": "died",
        "attempt": 1,
        "state": "running",
    }
