"""A task body stamps its writes with `current_fire().token`; a stale holder's write is refused.

Two nodes (two lock clients of one real backend, two fire runners) run the two fires
of one task in turn. The first node's body writes, then keeps a second write back
as a paused process would, and sends it only after the second node's holding has
written: that late write carries the older token and must be refused by the
resource, whatever the writer believes. The tokens come from the backend itself.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from sqlalchemy import Table, create_engine, select

from firefly_scheduling import current_fire
from firefly_scheduling.fencing import afenced_set, fenced_set, fenced_update
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.locks.port import DistributedLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_redis import AsyncRedisLock, RedisLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_tables import fenced_table

T0 = datetime(2030, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(seconds=60)


def _frozen(instant: datetime) -> Callable[[], datetime]:
    """A node's wall clock, standing at the fire's instant."""
    return lambda: instant


def _task() -> ScheduledDescriptor:
    name = f"tests.fenced_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=name, lock_name=name, lock_ttl=30, fixed_rate=60.0)


def _token() -> int:
    fire = current_fire()
    assert fire is not None
    assert fire.token is not None, "a first-party backend fences"
    return fire.token


def _run_two_nodes(
    make_lock: Callable[[], DistributedLock],
    write: Callable[[str, int], bool],
) -> tuple[list[tuple[int, bool]], list[FireResult]]:
    """Node A runs the fire at T0 and keeps a write back; node B runs the fire at T1."""
    task = _task()
    written: list[tuple[int, bool]] = []
    held_back: list[Callable[[], bool]] = []

    def body_a() -> None:
        token = _token()
        written.append((token, write("A, on time", token)))
        held_back.append(lambda: write("A, late", token))

    def body_b() -> None:
        token = _token()
        written.append((token, write("B", token)))

    results = []
    for instant, body in ((T0, body_a), (T1, body_b)):
        node = FireRunner(make_lock(), clock=_frozen(instant))
        try:
            results.append(node.run(Fire.at(task, instant), body))
        finally:
            node.close()
    (late,) = held_back
    token_a = written[0][0]
    written.append((token_a, late()))
    return written, results


@pytest.fixture
def accounts(postgres_url: str) -> Iterator[Table]:
    with fenced_table(_sqlalchemy(postgres_url), "fenced_fire", "owner", {1: "nobody"}) as table:
        yield table


def _sqlalchemy(postgres_url: str) -> str:
    return "postgresql+psycopg://" + postgres_url.split("://", 1)[1]


def test_a_postgres_task_lock_fences_a_postgres_row(postgres_url: str, accounts: Table) -> None:
    engine = create_engine(_sqlalchemy(postgres_url))

    def write(owner: str, token: int) -> bool:
        with engine.begin() as connection:
            return fenced_update(connection, accounts, accounts.c.id == 1, {"owner": owner}, token)

    try:
        written, results = _run_two_nodes(lambda: PgAdvisoryLock(postgres_url), write)
        with engine.connect() as reader:
            row = reader.execute(select(accounts.c.owner, accounts.c.fence_token)).one()
    finally:
        engine.dispose()
    (token_a, a_on_time), (token_b, b_wrote), (_, a_late) = written
    assert [result.verdict for result in results] == [Verdict.SUCCEEDED, Verdict.SUCCEEDED]
    assert token_b > token_a
    assert (a_on_time, b_wrote, a_late) == (True, True, False)
    assert tuple(row) == ("B", token_b)


def test_a_redis_task_lock_fences_a_redis_key(redis_url: str, redis_client: redis.Redis) -> None:
    key = f"fencing-test:fire:{uuid.uuid4().hex}"

    def write(owner: str, token: int) -> bool:
        return fenced_set(redis_client, key, owner, token)

    try:
        written, results = _run_two_nodes(lambda: RedisLock(redis_url), write)
        stored = redis_client.hgetall(key)
    finally:
        redis_client.delete(key)
    (token_a, a_on_time), (token_b, b_wrote), (_, a_late) = written
    assert [result.verdict for result in results] == [Verdict.SUCCEEDED, Verdict.SUCCEEDED]
    assert token_b > token_a
    assert (a_on_time, b_wrote, a_late) == (True, True, False)
    assert stored == {b"value": b"B", b"fence_token": str(token_b).encode()}


#: A bound on waits for the other node, so a broken run fails instead of hanging; never
#: an expectation of how long anything takes.
PATIENCE = 60.0


def test_a_holder_whose_lease_lapsed_mid_body_is_refused_after_the_next_holder_wrote(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A true zombie: node A's body is still running when its lease lapses on the server.

    A renews nothing (its keep-alive interval is longer than the test), so its 1 s
    lease lapses while its body waits; node B then takes the task lock for a later
    fire and writes. A's body wakes and writes with its own, older token: refused.
    """
    key = f"fencing-test:zombie:{uuid.uuid4().hex}"
    name = f"tests.zombie_{uuid.uuid4().hex}:job"
    task = ScheduledDescriptor(target=name, lock_name=name, lock_ttl=1.0, fixed_rate=60.0)
    a_wrote, b_wrote = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def body_a() -> None:
        token = _token()
        seen["a_on_time"] = fenced_set(redis_client, key, "A, on time", token)
        a_wrote.set()
        assert b_wrote.wait(PATIENCE), "node B never took the lapsed lock"
        fire = current_fire()
        assert fire is not None
        seen["a_told_lost"] = fire.lost
        seen["a_late"] = fenced_set(redis_client, key, "A, late", token)
        seen["token_a"] = token

    def body_b() -> None:
        token = _token()
        seen["b"] = fenced_set(redis_client, key, "B", token)
        seen["token_b"] = token
        b_wrote.set()

    node_a = FireRunner(RedisLock(redis_url), clock=_frozen(T0), keepalive_interval=3600.0)
    thread = threading.Thread(
        target=lambda: seen.setdefault("a", node_a.run(Fire.at(task, T0), body_a))
    )
    try:
        thread.start()
        assert a_wrote.wait(PATIENCE), f"node A's body never ran: {seen.get('a')}"
        # Node B tries a fire a minute at a time until it holds the lock (each fire is
        # claimed once, so every try is a fresh one).
        instant = T1
        while not b_wrote.is_set() and thread.is_alive():
            node_b = FireRunner(RedisLock(redis_url), clock=_frozen(instant))
            try:
                node_b.run(Fire.at(task, instant), body_b)
            finally:
                node_b.close()
            instant += timedelta(seconds=60)
            b_wrote.wait(0.05)
        thread.join(PATIENCE)
        stored = redis_client.hgetall(key)
    finally:
        b_wrote.set()
        thread.join()
        node_a.close()
        redis_client.delete(key)
    assert seen["token_b"] > seen["token_a"]
    assert (seen["a_on_time"], seen["b"], seen["a_late"]) == (True, True, False)
    assert seen["a_told_lost"] is True  # it could have known; the resource refused anyway
    assert stored == {b"value": b"B", b"fence_token": str(seen["token_b"]).encode()}


def test_an_asyncio_body_on_an_asyncio_host(redis_url: str, redis_client: redis.Redis) -> None:
    key = f"fencing-test:fire:{uuid.uuid4().hex}"
    task = _task()

    async def scenario() -> list[tuple[int, bool]]:
        client = redis.asyncio.Redis.from_url(redis_url)
        written: list[tuple[int, bool]] = []
        held_back: list[int] = []

        async def body_a() -> None:
            token = _token()
            written.append((token, await afenced_set(client, key, "A, on time", token)))
            held_back.append(token)

        async def body_b() -> None:
            token = _token()
            written.append((token, await afenced_set(client, key, "B", token)))

        try:
            for instant, body in ((T0, body_a), (T1, body_b)):
                node = AsyncFireRunner(AsyncRedisLock(redis_url), clock=_frozen(instant))
                try:
                    result = await node.run(Fire.at(task, instant), body)
                finally:
                    await node.aclose()
                assert result.verdict is Verdict.SUCCEEDED
            written.append((held_back[0], await afenced_set(client, key, "A, late", held_back[0])))
            return written
        finally:
            await client.aclose()

    try:
        (token_a, a_on_time), (token_b, b_wrote), (_, a_late) = asyncio.run(scenario())
        stored = redis_client.hgetall(key)
    finally:
        redis_client.delete(key)
    assert token_b > token_a
    assert (a_on_time, b_wrote, a_late) == (True, True, False)
    assert stored[b"value"] == b"B"
