"""A node that starts after an outage records what nobody ran without delaying the fire due now.

Found by `benchmarks/fleet.py`: a fleet restarted minutes after its last
run had every task's first fire record up to `MAX_PASSED_OVER_RECORDED` passed-over
instants as skipped first, one statement and one commit each, on the fire's path.
On PostgreSQL and MySQL that was 302,042 catch-up statements against 39,663 runs,
and the fires due at boot went late by the time those took.

Now the catch-up is written after the fire due now, as a few multi-row statements.
The evidence comes from outside the code under test: the statements are counted by
SQLAlchemy's cursor events on the history's own engine, and the rows are read back by
a second client (a separate engine) from the real database.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.history.port import RunState
from firefly_scheduling.hosts.apscheduler.jobs import (
    MAX_PASSED_OVER_RECORDED,
    RecurringFire,
    trigger_for,
)
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling_database.engine import lock_engine
from firefly_scheduling_database.sql_history.store import DEFAULT_TABLE, SqlRunHistory

#: Far more statements than a multi-row catch-up needs, far fewer than one per instant.
MOST_STATEMENTS = 40
#: The task (what it does is not under test, when it starts is), from the core's unit
#: tests' importable task module.
TASKS = Path(__file__).resolve().parents[1] / "packages/firefly-scheduling/tests/host_support"


@pytest.fixture
def second_client(sql_history_url: str) -> Iterator[sa.Engine]:
    """An engine of its own (not the stores' shared one): it reads what the server holds."""
    engine = lock_engine(sql_history_url)
    yield engine
    engine.dispose()


def test_a_restarted_node_runs_the_fire_due_now_first_and_writes_the_catch_up_in_a_few_statements(
    sql_history_url: str, second_client: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(TASKS))
    lock = f"catch-up-{uuid.uuid4().hex[:12]}"
    descriptor = ScheduledDescriptor(
        target="firefly_host_unit_tasks:ping", fixed_rate=1.0, lock_name=lock, lock_ttl=30.0
    )
    # The fleet's last record: a fire 30 minutes ago, written by a node since gone.
    last_run = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
    earlier = SqlRunHistory(sql_history_url)
    try:
        earlier.start(descriptor.target, last_run, lock=lock, node="gone", token=1, at=last_run)
        earlier.finish(
            descriptor.target,
            last_run,
            lock=lock,
            token=1,
            state=RunState.SUCCEEDED,
            error=None,
            at=last_run,
        )
    finally:
        earlier.close()

    runtime = build_runtime(
        [descriptor],
        Settings(lock_provider="memory", history_url=sql_history_url),
        host="run",
        node="restarted",
    )
    statements: list[str] = []
    try:
        history = runtime.fire_runner.get().history
        assert isinstance(history, SqlRunHistory)

        def count(*args: Any) -> None:
            statements.append(str(args[2]).split(None, 1)[0].upper())

        sa.event.listen(history.engine, "before_cursor_execute", count)
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        sa.event.remove(history.engine, "before_cursor_execute", count)
    finally:
        runtime.close()

    with second_client.connect() as connection:
        rows = connection.execute(
            sa.text(
                f"SELECT instant, state, started_at, ended_at FROM {DEFAULT_TABLE} "
                "WHERE lock_name = :lock ORDER BY instant"
            ),
            {"lock": lock.encode() if second_client.dialect.name == "mysql" else lock},
        ).all()
    run_now = rows[-1]
    skipped = [row for row in rows if row.state == RunState.SKIPPED.value]
    assert run_now.state == RunState.SUCCEEDED.value
    assert len(skipped) == MAX_PASSED_OVER_RECORDED, "30 minutes of a 1 s task, the newest kept"
    assert len(rows) == MAX_PASSED_OVER_RECORDED + 2, "the gone node's run, the catch-up, now"
    # The fire due now was not kept waiting for the catch-up: it started first.
    assert run_now.started_at <= min(row.ended_at for row in skipped), (
        f"the catch-up was written at {min(row.ended_at for row in skipped)}, "
        f"before the fire due now started at {run_now.started_at}"
    )
    assert len(statements) <= MOST_STATEMENTS, (
        f"{len(statements)} statements for one fire and its catch-up "
        f"({statements.count('INSERT')} INSERTs): one per passed-over fire"
    )
