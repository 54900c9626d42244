"""A body starts only with at least half its lease confirmed by the server.

Found by `benchmarks/chaos.py` (seed 31415, all seven setups at once on a loaded
machine, database on SQLite): node n2 took the shared lock (token 34), recorded the
fire's start, and passed the pre-body check because its local lease had not run out
yet. The tick then took the expired lease (token 35), adopted the fire, ran it and
ended, and only then did n2's body run: one fire, two runs. The evidence permits one
explanation: the check passed with little lease left, and the loaded node stalled
before the body's first statement. (The seed's replay on a quiet machine did not
repeat it: the stall is the machine's, not the schedule's.)

No check can close the gap between itself and the body's first statement, so the
check now leaves the body a margin: when less than half the lease remains, one
renewal on the server refreshes it (or finds it gone, and the fire is skipped). A
stall must then outlast half a lease inside a few statements, rather than whatever
was left.

The evidence is the server's: a second client reads the lease's remaining time from
inside the body, and a second client deletes the lease during the stall.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
import sqlalchemy

from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory
from firefly_scheduling.locks import BaseLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_redis import RedisLock

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
LEASE = 1.0
#: The stall between the acquisition and the body: 60 % of the lease, so 40 % is left.
STALL = 0.6


class Server:
    """One backend seen from outside the node: its lock, and a second client."""

    def __init__(
        self,
        lock: BaseLock,
        remaining: Callable[[str], float],
        drop: Callable[[str], None],
    ) -> None:
        self.lock = lock
        self.remaining = remaining
        self.drop = drop


def _redis(url: str) -> Server:
    observer = redis.Redis.from_url(url)

    def remaining(name: str) -> float:
        return float(observer.pttl(RedisLock.key(name))) / 1000

    def drop(name: str) -> None:
        observer.delete(RedisLock.key(name))

    return Server(RedisLock(url), remaining, drop)


def _sqlite(path: Path) -> Server:
    url = f"sqlite:///{path}"
    lock = DatabaseLeaseLock(url)
    lock.install()
    observer = sqlalchemy.create_engine(url)
    table = lock.tables.all[0].name

    def remaining(name: str) -> float:
        query = sqlalchemy.text(
            f"SELECT (julianday(locked_until) - julianday('now')) * 86400 FROM {table} "
            "WHERE name = :name"
        )
        with observer.connect() as connection:
            value = connection.execute(query, {"name": name}).scalar_one()
        return float(value)

    def drop(name: str) -> None:
        with observer.begin() as connection:
            connection.execute(
                sqlalchemy.text(f"DELETE FROM {table} WHERE name = :name"), {"name": name}
            )

    return Server(lock, remaining, drop)


@pytest.fixture(params=["redis", "database-sqlite"])
def server(request: pytest.FixtureRequest, redis_url: str, tmp_path: Path) -> Iterator[Server]:
    built = _redis(redis_url) if request.param == "redis" else _sqlite(tmp_path / "locks.db")
    try:
        yield built
    finally:
        built.lock.close()


def _task() -> tuple[ScheduledDescriptor, str]:
    """A locked one-second task, and its lock name."""
    target = f"tests.lease_margin_{uuid.uuid4().hex}:job"
    descriptor = ScheduledDescriptor(
        target=target, lock_name=target, lock_ttl=LEASE, fixed_rate=1.0
    )
    return descriptor, target


def _stalling_history(during_stall: Callable[[], None] = lambda: None) -> MemoryRunHistory:
    """A history whose `start` stalls the node for `STALL` seconds (the chaos pause)."""
    history = MemoryRunHistory()
    original_start = history.start

    def slow_start(*args: object, **kwargs: object) -> int | None:
        time.sleep(STALL)
        during_stall()
        return original_start(*args, **kwargs)  # type: ignore[arg-type]

    history.start = slow_start  # type: ignore[method-assign]
    return history


def test_the_body_starts_with_at_least_half_its_lease_on_the_server(server: Server) -> None:
    descriptor, name = _task()
    # The keep-alive would renew at a third of the lease: keep it out of the way, as a
    # stalled process's keep-alive is.
    runner = FireRunner(
        server.lock, history=_stalling_history(), clock=lambda: T0, keepalive_interval=60
    )
    seen: list[float] = []
    outcome = runner.run(Fire.at(descriptor, T0), lambda: seen.append(server.remaining(name)))
    assert outcome.verdict is Verdict.SUCCEEDED, outcome
    [left] = seen
    assert left >= LEASE / 2, f"the body started with {left:.3f}s of its {LEASE}s lease left"


def test_a_lease_the_server_dropped_during_the_stall_is_found_before_the_body(
    server: Server,
) -> None:
    descriptor, name = _task()
    history = _stalling_history(lambda: server.drop(name))
    runner = FireRunner(server.lock, history=history, clock=lambda: T0, keepalive_interval=60)
    ran: list[str] = []
    outcome = runner.run(Fire.at(descriptor, T0), lambda: ran.append("ran"))
    assert ran == [], "the body ran on a lease the server no longer held"
    assert outcome.verdict is Verdict.LOCK_LOST
    assert outcome.lost
