"""A caught-up fire whose end cannot be written for a while keeps its real outcome.

Found by the fault checker: a fire run late by catch-up is due long before it runs,
so its node retried the end of its run for the shortest time only (the fire was
already past grace), then let the task lock go; the next fire of the task, on another
node, found the record `running` and closed it `expired`, though the body had
succeeded. A caught-up run's end is now retried as long as an on-time run's, counted
from its start.

Redis holds the locks, PostgreSQL the history (read back by a client of its own);
the history's end writes (`finish`, `record_run`) fail for 12 s, longer than the
shortest retry, as the fault checker's `history_finish` fault does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from failing_history import EndWritesFail
from firefly_scheduling.fires.outcome import Fire, TriggerKind, Verdict
from firefly_scheduling.fires.recording import FINISH_RETRY_SECONDS
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunState
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_redis import RedisLock
from fresh_tables import default_history
from unique_tasks import unique_task

pytestmark = pytest.mark.slow

HISTORY_TABLE = "firefly_scheduling_runs"
#: Longer than the shortest retry of a run's end.
FAILING_SECONDS = FINISH_RETRY_SECONDS + 2.0


class EndsFailFor(EndWritesFail):
    """A real history whose end writes fail for `seconds` from now (monotonic)."""

    def __init__(self, inner: SqlRunHistory, seconds: float) -> None:
        until = time.monotonic() + seconds
        super().__init__(inner, lambda: time.monotonic() < until)
        self._inner = inner

    def skip_many(self, task: str, instants: Sequence[datetime], **kwargs: Any) -> int:
        return self._inner.skip_many(task, instants, **kwargs)


@pytest.fixture
def history(postgres_url: str) -> Iterator[SqlRunHistory]:
    with default_history(postgres_url) as history:
        yield history


def test_a_caught_up_run_whose_end_fails_a_while_is_not_closed_expired(
    redis_url: str, postgres_url: str, history: SqlRunHistory
) -> None:
    task = unique_task("caught_up_end", lock_ttl=2.0, fixed_rate=60.0, catchup=3600.0)
    now = datetime.now(UTC)
    missed = Fire(
        task, now.replace(second=0, microsecond=0) - timedelta(minutes=10), TriggerKind.CATCH_UP
    )
    flaky = EndsFailFor(SqlRunHistory(postgres_url, table=HISTORY_TABLE), FAILING_SECONDS)
    first = FireRunner(RedisLock(redis_url), history=flaky, node="first")
    try:
        caught_up = first.run(missed, lambda: None)
    finally:
        first.close()
    assert caught_up.verdict is Verdict.SUCCEEDED
    # The task's next fire, on another node, once the first gave its lock back.
    second = FireRunner(RedisLock(redis_url), history=history, node="second")
    try:
        second.run(Fire.at(task, now), lambda: None)
    finally:
        second.close()
    [record] = [
        r
        for r in history.runs(task.target, limit=10, lock=task.target)
        if r.instant == missed.instant
    ]
    assert (record.state, record.node) == (RunState.CAUGHT_UP, "first"), record
