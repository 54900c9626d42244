"""An `allow_all` fire whose body never ran leaves no `running` record behind.

Found by the fault checker (PostgreSQL, Redis): a fire of an `allow_all` task took
the free task lock and its start was written; the lock was lost before the body, so
the body was not run, and the record was left `running`: its start's reply was lost
(the node took the start as unrecorded, and wrote a skip, which never replaces a
run's record), or the history's end writes failed for longer than the runner
retries them. Of any other task, the next fire adopts or expires a record left
`running`; an `allow_all` task adopts nothing (a `running` record may be a live run
alongside), so the record stayed `running` for good: a fire neither run nor recorded
with a reason. Its record is now closed `expired` where the start was written (the
fire skipped where it was not), and a close the history refused is remembered, as
an unwritten end of a run is, and written once the history answers again (before
the node's next fires, and at its shutdown).

PostgreSQL holds the session lock and the history (read back by a client of its
own); the lock's session is ended by the server's administrator just after the
start is written, as the fault checker's `sessions` fault does, and its history
faults are played by a wrapper of the real store.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from failing_history import EndWritesFail
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.running import LOST_BEFORE_THE_BODY
from firefly_scheduling.history import HistoryError, RunState
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_postgres import PgAdvisoryLock
from unique_tasks import unique_task


class SessionEndedAfterStart(EndWritesFail):
    """A real history: each `start` is written, then the task lock's session is ended
    by an administrator; with `start_reply_lost`, the start then fails as if its
    reply were lost; its end writes fail until `healed`."""

    def __init__(
        self, inner: SqlRunHistory, postgres_url: str, lock_name: str, *, start_reply_lost: bool
    ) -> None:
        super().__init__(inner, lambda: not self.healed)
        self._inner = inner
        self._url = postgres_url
        self._key = PgAdvisoryLock.key(lock_name)  # signed, as the expression on pg_locks
        self._start_reply_lost = start_reply_lost
        self.healed = start_reply_lost
        self.ended_sessions = 0

    def start(self, *args: Any, **kwargs: Any) -> int | None:
        attempt = self._inner.start(*args, **kwargs)
        with psycopg.connect(self._url, autocommit=True) as admin:
            [(ended,)] = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype ="
                " 'advisory' AND granted AND ((classid::bigint << 32) | objid::bigint) = %s"
                " AND objsubid = 1",
                (self._key,),
            ).fetchall()
        self.ended_sessions += ended
        if self._start_reply_lost:
            raise HistoryError("the reply of the start was lost (injected)")
        return attempt


@pytest.mark.parametrize(
    "start_reply_lost",
    [
        pytest.param(True, id="start-reply-lost"),  # seed 646721, PostgreSQL
        # The close fails for the runner's whole retry window (`FINISH_RETRY_SECONDS`).
        pytest.param(False, id="close-refused-a-while", marks=pytest.mark.slow),
    ],
)
def test_an_allow_all_fire_not_run_is_closed_expired(
    postgres_url: str, history: SqlRunHistory, start_reply_lost: bool
) -> None:
    """One fire of a new `allow_all` task whose lock's session ends once its start is
    written; the history's end writes healed after the run, before the runner closes."""
    task = unique_task("allow_all_unrun", lock_ttl=2.0, fixed_rate=60.0, overlap="allow_all")
    target = task.target
    flaky = SessionEndedAfterStart(
        SqlRunHistory(postgres_url, table=history.table.name),
        postgres_url,
        target,
        start_reply_lost=start_reply_lost,
    )
    now = datetime.now(UTC).replace(microsecond=0)
    runner = FireRunner(PgAdvisoryLock(postgres_url), history=flaky, node="a")
    ran: list[int] = []
    try:
        result = runner.run(Fire.at(task, now), lambda: ran.append(1))
        assert flaky.ended_sessions == 1
        assert result.verdict is Verdict.LOCK_LOST, result
        assert ran == []
        flaky.healed = True
    finally:
        runner.close()  # writes what it remembers
    [record] = history.runs(target, lock=target)
    assert (record.instant, record.state, record.error) == (
        now,
        RunState.EXPIRED,
        LOST_BEFORE_THE_BODY,
    ), record
