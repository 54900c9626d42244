"""The runs of the fires won, started in the history with their claims and task locks.

On PostgreSQL (advisory locks and the database history, both on the real server)
`FireRunner.claim_fires` takes the task locks of the fires it won as one request,
then records their runs as started as one more (`BatchStartingHistory`), so a won
fire's worker sends neither the read of the task's running records nor its start.
The history's rules must hold as when each worker starts its own run,
checked by a second history reading the server: the record is `running` with the
holding's token before any worker runs; a died run is still adopted; a fire another
node recorded as skipped still runs; a fire no worker took in time is closed, and a
lock lost before the body closes its record, never leaving it `running`.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from firefly_scheduling.fires.outcome import ClaimOutcome, Fire, Verdict
from firefly_scheduling.fires.runner import TOO_LATE_FOR_A_WORKER, FireRunner
from firefly_scheduling.history import RunRecord, RunState
from firefly_scheduling.history.port import SCHEDULED
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_postgres import PgAdvisoryLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from claimed_fires import Clock, one_task, tasks

GRACE = 5.0


class CountingHistory(SqlRunHistory):
    """The real store, counting the per-fire calls a worker makes before its body."""

    def __init__(self, url: str, *, table: str) -> None:
        super().__init__(url, table=table)
        self.calls: list[str] = []

    def unfinished(self, task: str, *, lock: str) -> list[RunRecord]:
        self.calls.append("unfinished")
        return super().unfinished(task, lock=lock)

    def start(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        token: int | None,
        at: datetime,
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> int | None:
        self.calls.append("start")
        return super().start(
            task,
            instant,
            lock=lock,
            node=node,
            token=token,
            at=at,
            trigger=trigger,
            requested_by=requested_by,
        )


@pytest.fixture
def table() -> str:
    return f"runs_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def history(postgres_url: str, table: str) -> Iterator[CountingHistory]:
    store = CountingHistory(postgres_url, table=table)
    yield store
    store.table.drop(store.engine, checkfirst=True)
    store.close()


@pytest.fixture
def reader(postgres_url: str, table: str, history: CountingHistory) -> Iterator[SqlRunHistory]:
    """Another node's history on the same table: what the server holds."""
    store = SqlRunHistory(postgres_url, table=table)
    yield store
    store.close()


@pytest.fixture
def lock(postgres_url: str) -> Iterator[PgAdvisoryLock]:
    built = PgAdvisoryLock(postgres_url)
    yield built
    built.close()


def started_ahead(outcome: ClaimOutcome) -> bool:
    """Whether the batch started the fire's run; the fire must have its task lock."""
    assert outcome.task_lock is not None, outcome
    return outcome.task_lock.started


def holding_of(outcome: ClaimOutcome) -> Holding:
    assert outcome.task_lock is not None, outcome
    holding = outcome.task_lock.answer
    assert isinstance(holding, Holding), outcome
    return holding


def test_won_fires_are_recorded_running_before_a_worker_runs_them(
    lock: PgAdvisoryLock, history: CountingHistory, reader: SqlRunHistory
) -> None:
    clock = Clock()
    runner = FireRunner(lock, history=history, clock=clock, grace=GRACE, node="node-a")
    fires = tasks(3)
    outcomes = runner.claim_fires([Fire.at(descriptor, clock.now) for descriptor in fires])
    for descriptor, outcome in zip(fires, outcomes, strict=True):
        assert started_ahead(outcome), outcome
        [record] = reader.unfinished(descriptor.target, lock=descriptor.lock_name or "")
        assert (record.instant, record.node, record.attempt) == (clock.now, "node-a", 1)
        assert record.token == holding_of(outcome).fence
    seen_in_body: list[RunState] = []
    for descriptor, outcome in zip(fires, outcomes, strict=True):
        target, name = descriptor.target, descriptor.lock_name or ""

        def body(target: str = target, name: str = name) -> None:
            seen_in_body.append(reader.runs(target, lock=name)[0].state)

        result = runner.run(Fire.at(descriptor, clock.now), body, claim=outcome)
        assert (result.verdict, result.attempt) == (Verdict.SUCCEEDED, 1), result
        assert result.token == holding_of(outcome).fence
        [record] = reader.runs(target, lock=name)
        assert (record.state, record.token) == (RunState.SUCCEEDED, result.token)
    assert seen_in_body == [RunState.RUNNING] * 3
    assert history.calls == [], "a worker read or started a run the batch had started"


def test_a_died_run_is_not_started_over_and_is_adopted_by_the_worker(
    lock: PgAdvisoryLock, history: CountingHistory, reader: SqlRunHistory
) -> None:
    clock = Clock()
    descriptor, target, name = one_task()
    earlier = clock.now - timedelta(seconds=1)
    assert reader.start(target, earlier, lock=name, node="dead", token=None, at=earlier) == 1
    runner = FireRunner(lock, history=history, clock=clock, grace=GRACE)
    [outcome] = runner.claim_fires([Fire.at(descriptor, clock.now)])
    assert not started_ahead(outcome)
    ran: list[int] = []
    result = runner.run(Fire.at(descriptor, clock.now), lambda: ran.append(1), claim=outcome)
    assert result.verdict is Verdict.SUCCEEDED, result
    [adopted] = result.adopted
    assert (adopted.instant, adopted.verdict, adopted.attempt) == (earlier, Verdict.SUCCEEDED, 2)
    assert ran == [1, 1]
    records = {record.instant: record for record in reader.runs(target, lock=name)}
    assert (records[earlier].attempt, records[earlier].state) == (2, RunState.SUCCEEDED)
    assert records[clock.now].state is RunState.SUCCEEDED


def test_a_fire_another_node_recorded_as_skipped_still_runs(
    lock: PgAdvisoryLock, history: CountingHistory, reader: SqlRunHistory
) -> None:
    clock = Clock()
    descriptor, target, name = one_task()
    reader.skip(target, clock.now, lock=name, node="late", reason="too late there", at=clock.now)
    runner = FireRunner(lock, history=history, clock=clock, grace=GRACE)
    [outcome] = runner.claim_fires([Fire.at(descriptor, clock.now)])
    assert not started_ahead(outcome)
    result = runner.run(Fire.at(descriptor, clock.now), lambda: None, claim=outcome)
    assert (result.verdict, result.attempt) == (Verdict.SUCCEEDED, 1), result
    assert [record.state for record in reader.runs(target, lock=name)] == [RunState.SUCCEEDED]


def test_a_fire_started_with_its_claim_but_too_late_for_a_worker_is_closed(
    lock: PgAdvisoryLock, history: CountingHistory, reader: SqlRunHistory
) -> None:
    clock = Clock()
    descriptor, target, name = one_task()
    instant = clock.now
    runner = FireRunner(lock, history=history, clock=clock, grace=GRACE)
    [outcome] = runner.claim_fires([Fire.at(descriptor, instant)])
    assert started_ahead(outcome)
    clock.now = instant + timedelta(seconds=GRACE + 1)
    ran: list[int] = []
    result = runner.run(Fire.at(descriptor, instant), lambda: ran.append(1), claim=outcome)
    assert result.verdict is Verdict.TOO_LATE
    assert ran == []
    [record] = reader.runs(target, lock=name)
    assert (record.state, record.error) == (RunState.EXPIRED, TOO_LATE_FOR_A_WORKER)
    assert holding_of(outcome).released
    assert reader.unfinished(target, lock=name) == []


def test_a_lock_lost_between_the_batch_and_the_body_closes_the_started_record(
    postgres_url: str,
    lock: PgAdvisoryLock,
    history: CountingHistory,
    reader: SqlRunHistory,
) -> None:
    """The batch's session is terminated by the server's administrator (a second
    connection) after the runs were started: the pre-body check must find the lock
    gone, skip the body, and close the record rather than leave it `running`."""
    clock = Clock()
    descriptor, target, name = one_task()
    runner = FireRunner(lock, history=history, clock=clock, grace=GRACE)
    [outcome] = runner.claim_fires([Fire.at(descriptor, clock.now)])
    assert started_ahead(outcome)
    key = PgAdvisoryLock.key(name)  # signed, as the expression on pg_locks below
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        [(terminated,)] = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory'"
            " AND granted AND ((classid::bigint << 32) | objid::bigint) = %s AND objsubid = 1",
            (key,),
        ).fetchall()
    assert terminated == 1
    ran: list[int] = []
    result = runner.run(Fire.at(descriptor, clock.now), lambda: ran.append(1), claim=outcome)
    assert result.verdict is Verdict.LOCK_LOST, result
    assert ran == []
    [record] = reader.runs(target, lock=name)
    assert (record.state, record.error) == (
        RunState.EXPIRED,
        "the task lock lapsed or was lost before the body started",
    ), record
