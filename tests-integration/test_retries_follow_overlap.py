"""A retry due after its task's next fire follows the task's `overlap=`, on real servers.

A `fixed_rate` task of 1 s whose retry backoff puts retry 1 past the next fire: the
fire fails, then the next fire runs a long body on another runner (its own lock
client, as another node), and the retry is run at its due time on a third. The lock
backend is Redis or PostgreSQL; the history is PostgreSQL, read back by a client of
its own. Each body appends its start and end, stamped with CLOCK_MONOTONIC, to an
`O_APPEND` witness file: whether the retry ran, and whether it overlapped the next
fire, come from the bodies, not from the runner's report.

* `skip` and `cancel_other`: the retry is not asked for; the fire's record says why.
* `buffer_one`, `buffer_all`: the retry waits for the next fire's run to end, then runs.
* `allow_all`: the retry runs at once, alongside the next fire's run.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunRecord, RunState
from firefly_scheduling.locks import DistributedLock
from firefly_scheduling.schedule.fire_instants import rate_fire_after, rate_step
from firefly_scheduling.schedule.retry_backoff import retry_delay
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_descriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_redis import RedisLock
from firefly_scheduling_redis.protocol import LOCK_KEY_PREFIX

pytestmark = pytest.mark.slow

RATE_SECONDS = 1.0
BACKOFF_SECONDS = 3.0
#: Retry 1's delay is drawn from (task, instant): the test takes a task whose delay
#: puts the retry well past the next fire and well inside the next fire's body.
DELAY_RANGE = (timedelta(seconds=1.6), timedelta(seconds=2.6))
NEXT_BODY_SECONDS = 3.0
HISTORY_TABLE = "firefly_scheduling_runs"


class Witness:
    """Body starts and ends, one `O_APPEND` write each, stamped with CLOCK_MONOTONIC."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def stamp(self, who: str, event: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{who} {event} {time.monotonic_ns()}\n".encode())
        finally:
            os.close(fd)

    def stamps(self) -> dict[tuple[str, str], int]:
        if not self.path.exists():
            return {}
        lines = (line.split() for line in self.path.read_text().splitlines())
        return {(who, event): int(stamp) for who, event, stamp in lines}

    def body(self, who: str, seconds: float, *, fails: bool = False) -> Callable[[], None]:
        def run() -> None:
            self.stamp(who, "start")
            time.sleep(seconds)
            self.stamp(who, "end")
            if fails:
                raise RuntimeError(f"{who} fails")

        return run


def retrying_task(overlap: str) -> ScheduledDescriptor:
    """A locked 1 s task with one retry, and a name of its own."""
    target = f"tests.retry_overlap_{uuid.uuid4().hex}:job"
    return validate_descriptor(
        ScheduledDescriptor(
            target=target,
            lock_name=target,
            lock_ttl=5.0,
            fixed_rate=RATE_SECONDS,
            overlap=overlap,
            retries=1,
            retry_backoff=BACKOFF_SECONDS,
            retry_backoff_max=BACKOFF_SECONDS,
        )
    )


def instant_and_task(overlap: str) -> tuple[datetime, ScheduledDescriptor]:
    """The next fire instant of the 1 s grid, and a task whose retry 1 after it is due
    in `DELAY_RANGE` after the failed run's end."""
    step = rate_step(RATE_SECONDS)
    instant = rate_fire_after(step, datetime.now(UTC))
    while True:
        task = retrying_task(overlap)
        delay = retry_delay(
            task.target, instant, 1, backoff=BACKOFF_SECONDS, backoff_max=BACKOFF_SECONDS
        )
        if DELAY_RANGE[0] <= delay <= DELAY_RANGE[1]:
            return instant, task


def sleep_until(when: datetime) -> None:
    time.sleep(max(0.0, (when - datetime.now(UTC)).total_seconds()))


@pytest.fixture
def history(postgres_url: str) -> Iterator[SqlRunHistory]:
    """A second client of the runners' history."""
    store = SqlRunHistory(postgres_url, table=HISTORY_TABLE)
    store.install()
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(params=["redis", "postgres"])
def new_lock(
    request: pytest.FixtureRequest, redis_url: str, postgres_url: str
) -> Iterator[Callable[[], DistributedLock]]:
    """A lock client of its own per runner, as on separate nodes."""
    made: list[RedisLock | PgAdvisoryLock] = []

    def make() -> DistributedLock:
        lock = RedisLock(redis_url) if request.param == "redis" else PgAdvisoryLock(postgres_url)
        made.append(lock)
        return lock

    yield make
    for lock in made:
        lock.close()


def runner(lock: DistributedLock, postgres_url: str, node: str) -> FireRunner:
    return FireRunner(
        lock,
        history=SqlRunHistory(postgres_url, table=HISTORY_TABLE),
        node=node,
        owns_history=True,
    )


def fail_first_run(
    overlap: str, new_lock: Callable[[], DistributedLock], postgres_url: str, witness: Witness
) -> tuple[ScheduledDescriptor, FireResult]:
    instant, task = instant_and_task(overlap)
    sleep_until(instant)
    first = runner(new_lock(), postgres_url, "first")
    try:
        failed = first.run(Fire.at(task, instant), witness.body("first", 0.05, fails=True))
    finally:
        first.close()
    assert failed.verdict is Verdict.FAILED
    return task, failed


def run_next_fire_and_retry(
    task: ScheduledDescriptor,
    failed: FireResult,
    new_lock: Callable[[], DistributedLock],
    postgres_url: str,
    witness: Witness,
) -> FireResult:
    """The next fire runs its long body on one runner; the retry, at its due time while
    that body runs, on another. The retry's result."""
    assert failed.retry is not None
    assert failed.retry.retry is not None
    following = Fire.at(task, rate_fire_after(rate_step(RATE_SECONDS), failed.fire.instant))
    next_runner = runner(new_lock(), postgres_url, "next")
    retry_runner = runner(new_lock(), postgres_url, "retry")
    results: list[FireResult] = []

    def run_next() -> None:
        sleep_until(following.due)
        results.append(next_runner.run(following, witness.body("next", NEXT_BODY_SECONDS)))

    thread = threading.Thread(target=run_next)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while ("next", "start") not in witness.stamps() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ("next", "start") in witness.stamps(), "the next fire never ran"
        sleep_until(failed.retry.retry.due)
        retried = retry_runner.run(failed.retry, witness.body("retry", 0.1))
    finally:
        thread.join(60)
        next_runner.close()
        retry_runner.close()
    assert [result.verdict for result in results] == [Verdict.SUCCEEDED]
    return retried


def record_of(history: SqlRunHistory, task: ScheduledDescriptor, instant: datetime) -> RunRecord:
    """The fire's record, read by the second client."""
    [record] = [
        r for r in history.runs(task.target, limit=10, lock=task.target) if r.instant == instant
    ]
    return record


@pytest.mark.parametrize("overlap", ["skip", "cancel_other"])
def test_under_skip_and_cancel_other_the_retry_is_skipped_with_its_reason(
    overlap: str,
    tmp_path: Path,
    new_lock: Callable[[], DistributedLock],
    postgres_url: str,
    history: SqlRunHistory,
) -> None:
    witness = Witness(tmp_path / "witness.log")
    task, failed = fail_first_run(overlap, new_lock, postgres_url, witness)
    assert failed.retry is None
    record = record_of(history, task, failed.fire.instant)
    assert (record.state, record.attempt) == (RunState.FAILED, 1)
    assert record.error is not None
    assert "retry 1 of 1 skipped: due " in record.error
    assert f"(overlap='{overlap}': the next fire takes over)" in record.error


@pytest.mark.parametrize("overlap", ["buffer_one", "buffer_all"])
def test_under_buffering_the_retry_waits_for_the_next_fire_then_runs(
    overlap: str,
    tmp_path: Path,
    new_lock: Callable[[], DistributedLock],
    postgres_url: str,
    history: SqlRunHistory,
) -> None:
    witness = Witness(tmp_path / "witness.log")
    task, failed = fail_first_run(overlap, new_lock, postgres_url, witness)
    retried = run_next_fire_and_retry(task, failed, new_lock, postgres_url, witness)
    assert (retried.verdict, retried.attempt) == (Verdict.SUCCEEDED, 2), retried
    assert retried.buffered_seconds is not None
    assert retried.buffered_seconds > 0
    stamps = witness.stamps()
    assert stamps[("retry", "start")] >= stamps[("next", "end")]  # it waited its turn
    record = record_of(history, task, failed.fire.instant)
    assert (record.state, record.attempt, record.error) == (RunState.SUCCEEDED, 2, "retry 1 of 1")


def test_under_allow_all_the_retry_runs_alongside_the_next_fire(
    tmp_path: Path,
    new_lock: Callable[[], DistributedLock],
    postgres_url: str,
    history: SqlRunHistory,
) -> None:
    witness = Witness(tmp_path / "witness.log")
    task, failed = fail_first_run("allow_all", new_lock, postgres_url, witness)
    retried = run_next_fire_and_retry(task, failed, new_lock, postgres_url, witness)
    assert (retried.verdict, retried.attempt) == (Verdict.SUCCEEDED, 2), retried
    stamps = witness.stamps()
    assert stamps[("next", "start")] < stamps[("retry", "start")] < stamps[("next", "end")]
    record = record_of(history, task, failed.fire.instant)
    assert (record.state, record.attempt, record.error) == (RunState.SUCCEEDED, 2, "retry 1 of 1")


def test_a_run_that_lost_its_task_lock_asks_for_no_retry(
    redis_url: str, redis_client: redis.Redis, postgres_url: str, history: SqlRunHistory
) -> None:
    """Found by the fault checker: a node whose lock lapsed while its body failed
    asked for a retry although another node had adopted the fire and run it to a
    success; with its history start failing, the retry ran the fire once more. The
    lock is taken away here by a second Redis client, as a lapse would."""
    task = retrying_task("buffer_one")  # its retry is asked for, wherever it falls
    runner_ = runner(RedisLock(redis_url), postgres_url, "lost")

    def body() -> None:
        assert redis_client.delete(f"{LOCK_KEY_PREFIX}{task.target}") == 1
        time.sleep(2.0)  # the keep-alive finds the lock gone
        raise RuntimeError("fails after its lock was lost")

    try:
        result = runner_.run(Fire.at(task, datetime.now(UTC)), body)
    finally:
        runner_.close()
    assert result.verdict is Verdict.FAILED
    assert result.lost
    assert result.retry is None
