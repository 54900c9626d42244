"""A session lock whose session ended while the body ran: the run must be reported lost.

Found by the CI lane of `benchmarks/chaos.py` (seed 8, PostgreSQL): node n1 held the
`long` task's advisory lock (token 3) and was SIGSTOPped inside its body; the nemesis
ended its server session meanwhile, so the tick took the lock (token 4), adopted the
fire and started its body while n1's was still running. n1 resumed and finished its
body before its keep-alive's next check. Its run was reported fenced but not lost:
the release met the dead session, and the session layer had already taken the
holding off that session, so the session's end marked nothing lost.

Here the body ends its own session through a second client (`pg_terminate_backend`,
MariaDB's `KILL`), then a second lock on the server takes the name: the overlap the
checker saw, proved by the server. The keep-alive cannot find the loss first (one
renewal per 10 s of a 30 s lease), so only the release can.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.history import MemoryRunHistory
from firefly_scheduling.locks.session import SessionLock
from firefly_scheduling.locks.session_async import AsyncSessionLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from session_killers import Killer, mysql_killer, pg_killer

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class Backend:
    """Makers of the sync and asyncio locks of one server, and a killer of a holder."""

    def __init__(
        self,
        sync: Callable[[], SessionLock[Any]],
        asynchronous: Callable[[], AsyncSessionLock[Any]],
        kill: Killer,
    ) -> None:
        self.sync = sync
        self.asynchronous = asynchronous
        self.kill = kill


@pytest.fixture(params=["postgres", "mysql"])
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        return Backend(
            lambda: PgAdvisoryLock(url), lambda: AsyncPgAdvisoryLock(url), pg_killer(url)
        )
    url = request.getfixturevalue("mysql_url")
    return Backend(lambda: MySqlNamedLock(url), lambda: AsyncMySqlNamedLock(url), mysql_killer(url))


def _task() -> ScheduledDescriptor:
    name = f"tests.session_ended_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=name, lock_name=name, lock_ttl=30.0, fixed_rate=60.0)


def _taken_by(other: SessionLock[Any], name: str) -> None:
    """Until `other` holds `name`: the server frees a killed session's locks shortly after."""
    deadline = time.monotonic() + 10
    while not other.try_acquire(name, 30):
        assert time.monotonic() < deadline, f"{name!r} stayed held after its session ended"
        time.sleep(0.02)


def test_a_sync_run_whose_session_ended_inside_the_body_is_reported_lost(
    backend: Backend,
) -> None:
    descriptor = _task()
    name = descriptor.lock_name
    assert name is not None
    lock, other = backend.sync(), backend.sync()
    overlapped: list[bool] = []

    def body() -> None:
        backend.kill(name)
        _taken_by(other, name)
        overlapped.append(True)

    try:
        outcome = FireRunner(lock, history=MemoryRunHistory(), clock=lambda: T0).run(
            Fire.at(descriptor, T0), body
        )
        assert overlapped == [True], "another session held the lock while the body ran"
        assert outcome.verdict is Verdict.SUCCEEDED, outcome
        assert outcome.lost, "the run held its lock with another holder, yet was not lost"
        assert other.is_held(name), "the release touched the newer holder's lock"
        assert lock.try_acquire(name, 30) is False, "the newer holder lost the name"
    finally:
        other.release(name)
        lock.close()
        other.close()


def test_an_asyncio_run_whose_session_ended_inside_the_body_is_reported_lost(
    backend: Backend,
) -> None:
    descriptor = _task()
    name = descriptor.lock_name
    assert name is not None

    async def scenario() -> None:
        lock, other = backend.asynchronous(), backend.asynchronous()
        overlapped: list[bool] = []

        async def body() -> None:
            await asyncio.to_thread(backend.kill, name)
            deadline = time.monotonic() + 10
            while not await other.try_acquire(name, 30):
                assert time.monotonic() < deadline, f"{name!r} stayed held"
                await asyncio.sleep(0.02)
            overlapped.append(True)

        try:
            runner = AsyncFireRunner(lock, history=MemoryRunHistory(), clock=lambda: T0)
            outcome = await runner.run(Fire.at(descriptor, T0), body)
            assert overlapped == [True]
            assert outcome.verdict is Verdict.SUCCEEDED, outcome
            assert outcome.lost, "the run held its lock with another holder, yet was not lost"
            assert other.is_held(name), "the release touched the newer holder's lock"
        finally:
            await other.release(name)
            await lock.aclose()
            await other.aclose()

    asyncio.run(scenario())
