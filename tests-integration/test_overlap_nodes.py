"""`overlap=` across two nodes sharing a lock server (Redis, or PostgreSQL's session
locks) and a run history on PostgreSQL.

Each node is a `FireRunner` with its own clients (its own lock connection, its own
history engine), as on two machines. The bodies write what they did to a witness
file opened with `O_APPEND` (one line per start and end, stamped with the kernel's
monotonic clock), and a third client reads the history and the Redis server, so what
is checked is what ran, not what the runners say:

* `allow_all`: a fire that comes while the run of an earlier fire holds the task
  lock on the other node runs at once, alongside it, and each fire still runs once
  (the second node given the same fire finds it claimed);
* `buffer_one`: the fire that comes while the other node runs waits, holding the
  task's one waiting slot on the lock server (a third client finds it held); a
  third fire, on the first node, is
  skipped and recorded with why; the waiting fire runs after the first run ended,
  never during it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.fires.overlap_names import waiting_slots
from firefly_scheduling.fires.policy import ANOTHER_FIRE_WAITS
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.fires.running import CANCELLED_BY_A_NEWER_FIRE
from firefly_scheduling.history import RunState
from firefly_scheduling.locks.port import DistributedLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock
from firefly_scheduling_redis import AsyncRedisLock, RedisLock
from firefly_scheduling_redis.protocol import LOCK_KEY_PREFIX

sys.path.insert(0, str(Path(__file__).resolve().parent))

T0 = datetime(2030, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
LOCK_TTL = 1.0
#: How long a body or the test waits for the other node before giving up (a loaded machine).
PATIENCE = 30.0


class Witness:
    """The bodies' own account: `start`/`end` lines appended with O_APPEND."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def write(self, event: str, fire: int, node: str) -> None:
        line = f"{event} {fire} {node} {time.monotonic_ns()}\n".encode()
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(descriptor, line)
        finally:
            os.close(descriptor)

    def events(self) -> list[tuple[str, int, str, int]]:
        found = []
        for line in self.path.read_text().splitlines():
            event, fire, node, stamp = line.split()
            found.append((event, int(fire), node, int(stamp)))
        return found

    def stamp(self, event: str, fire: int) -> int:
        [stamp] = [at for kind, each, _, at in self.events() if (kind, each) == (event, fire)]
        return stamp

    def quick(self, fire: int, node: str) -> Callable[[], None]:
        """A body that writes its start and its end at once."""

        def body() -> None:
            self.write("start", fire, node)
            self.write("end", fire, node)

        return body

    def wait_for(self, event: str, fire: int) -> None:
        give_up = time.monotonic() + PATIENCE
        while not any((kind, each) == (event, fire) for kind, each, _, _ in self.events()):
            assert time.monotonic() < give_up, f"no {event} of fire {fire} in the witness"
            time.sleep(0.01)


class Node:
    """One node: a runner with its own lock client and its own history engine."""

    def __init__(self, name: str, lock: DistributedLock, postgres_url: str, table: str) -> None:
        self.name = name
        self.history = SqlRunHistory(postgres_url, table=table)
        self.runner = FireRunner(
            lock,
            history=self.history,
            clock=lambda: T0,
            node=name,
            keepalive_interval=0.2,
        )

    def run(self, fire: Fire, body: Callable[[], object]) -> FireResult:
        return self.runner.run(fire, body)

    def close(self) -> None:
        self.runner.close()
        self.history.close()


@pytest.fixture(params=["redis", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_lock(backend: str, redis_url: str, postgres_url: str) -> Callable[[], DistributedLock]:
    """A new client of the lock server: another node's, or an operator's."""
    if backend == "redis":
        return lambda: RedisLock(redis_url)
    return lambda: PgAdvisoryLock(postgres_url)


@pytest.fixture
def nodes(
    new_lock: Callable[[], DistributedLock], postgres_url: str, history: SqlRunHistory
) -> Iterator[tuple[Node, Node]]:
    table = history.table.name
    pair = (Node("a", new_lock(), postgres_url, table), Node("b", new_lock(), postgres_url, table))
    try:
        yield pair
    finally:
        for node in pair:
            node.close()


def _task(overlap: str) -> ScheduledDescriptor:
    name = f"tests.overlap_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(
        target=name, lock_name=name, lock_ttl=LOCK_TTL, fixed_rate=60.0, overlap=overlap
    )


def _fire(task: ScheduledDescriptor, number: int) -> Fire:
    return Fire.at(task, T0 + (number - 1) * MINUTE)


def test_allow_all_runs_a_fire_alongside_the_run_on_another_node_and_each_fire_once(
    nodes: tuple[Node, Node], history: SqlRunHistory, tmp_path: Path
) -> None:
    a, b = nodes
    task = _task("allow_all")
    witness = Witness(tmp_path / "witness")

    def first() -> None:
        witness.write("start", 1, "a")
        witness.wait_for("end", 2)  # only a fire run alongside can end first
        witness.write("end", 1, "a")

    second = witness.quick(2, "b")

    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(a.run, _fire(task, 1), first)
        witness.wait_for("start", 1)
        alongside = b.run(_fire(task, 2), second)
        again = b.run(_fire(task, 1), second)  # the same fire, on the other node
        ran = running.result(timeout=PATIENCE)

    assert (ran.verdict, alongside.verdict) == (Verdict.SUCCEEDED, Verdict.SUCCEEDED)
    assert again.verdict is Verdict.CLAIMED_ELSEWHERE
    assert ran.token is not None
    assert alongside.token is None
    assert witness.stamp("start", 1) < witness.stamp("start", 2) < witness.stamp("end", 1)
    assert [(kind, fire) for kind, fire, _, _ in witness.events()].count(("start", 1)) == 1
    records = {record.instant: record for record in history.runs(task.target)}
    assert {at: (r.state, r.node) for at, r in records.items()} == {
        T0: (RunState.SUCCEEDED, "a"),
        T0 + MINUTE: (RunState.SUCCEEDED, "b"),
    }


def _taken(new_lock: Callable[[], DistributedLock], name: str) -> bool:
    """Whether a third client can take `name` (given back at once)."""
    probe = new_lock()
    try:
        took = probe.try_acquire(name, 5)
        if took:
            probe.release(name)
        return took
    finally:
        close = getattr(probe, "close", None)
        if close is not None:
            close()


def _until_buffered(caplog: pytest.LogCaptureFixture, fire: Fire) -> None:
    """Wait for the log line saying `fire` took the waiting slot."""
    give_up = time.monotonic() + PATIENCE
    needle = f"fire {fire.instant.isoformat()} buffered"
    while not any(needle in record.getMessage() for record in caplog.records):
        assert time.monotonic() < give_up, f"{needle!r} never logged"
        time.sleep(0.01)


def _buffering(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> tuple[Witness, threading.Event, Callable[[int, str], Callable[[], None]]]:
    """A witness, the event that lets fire 1 end, and the bodies; the fires' log captured."""
    witness, go = Witness(tmp_path / "witness"), threading.Event()
    caplog.set_level(logging.INFO, logger="firefly_scheduling.fires")
    return witness, go, _bodies(witness, go)


def _bodies(witness: Witness, go: threading.Event) -> Callable[[int, str], Callable[[], None]]:
    """Bodies that write their start and end; fire 1's waits for `go` in between."""

    def body(number: int, node: str) -> Callable[[], None]:
        def run() -> None:
            witness.write("start", number, node)
            if number == 1:
                assert go.wait(PATIENCE), "the test never let the first run end"
            witness.write("end", number, node)

        return run

    return body


def test_buffer_one_runs_the_waiting_fire_after_the_run_on_another_node_and_skips_a_third(
    nodes: tuple[Node, Node],
    history: SqlRunHistory,
    tmp_path: Path,
    backend: str,
    new_lock: Callable[[], DistributedLock],
    redis_client: redis.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = nodes
    task = _task("buffer_one")
    witness, go, body = _buffering(tmp_path, caplog)

    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(a.run, _fire(task, 1), body(1, "a"))
        witness.wait_for("start", 1)
        buffered: Future[FireResult] = pool.submit(b.run, _fire(task, 2), body(2, "b"))
        _until_buffered(caplog, _fire(task, 2))
        [slot] = waiting_slots(task.target, 1)
        if backend == "redis":  # read, as an operator would, without taking anything
            assert redis_client.exists(LOCK_KEY_PREFIX + slot) == 1
        assert not _taken(new_lock, slot)  # the server holds the one waiting slot
        third = a.run(_fire(task, 3), body(3, "a"))
        go.set()
        ran, waited = running.result(timeout=PATIENCE), buffered.result(timeout=PATIENCE)

    assert (ran.verdict, waited.verdict) == (Verdict.SUCCEEDED, Verdict.SUCCEEDED)
    assert third.verdict is Verdict.OVERLAPPING
    assert waited.buffered_seconds is not None
    assert waited.buffered_seconds > 0
    assert witness.stamp("end", 1) < witness.stamp("start", 2)
    assert 3 not in {fire for _, fire, _, _ in witness.events()}
    assert _taken(new_lock, slot)  # given back once it held the task lock
    records = {record.instant: record for record in history.runs(task.target)}
    assert {at: (r.state, r.node) for at, r in records.items()} == {
        T0: (RunState.SUCCEEDED, "a"),
        T0 + MINUTE: (RunState.SUCCEEDED, "b"),
        T0 + 2 * MINUTE: (RunState.SKIPPED, "a"),
    }
    assert records[T0 + 2 * MINUTE].error == ANOTHER_FIRE_WAITS


def test_buffer_all_runs_the_waiting_fires_of_both_nodes_one_by_one_oldest_first(
    nodes: tuple[Node, Node],
    history: SqlRunHistory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = nodes
    task = _task("buffer_all")
    witness, go, body = _buffering(tmp_path, caplog)

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(a.run, _fire(task, 1), body(1, "a"))]
        witness.wait_for("start", 1)
        for number in (4, 3, 2):  # the newest comes first, on alternate nodes
            on = b if number % 2 == 0 else a
            futures.append(pool.submit(on.run, _fire(task, number), body(number, on.name)))
            _until_buffered(caplog, _fire(task, number))
        go.set()
        results = [future.result(timeout=PATIENCE) for future in futures]

    assert [result.verdict for result in results] == [Verdict.SUCCEEDED] * 4
    starts = [fire for kind, fire, _, _ in witness.events() if kind == "start"]
    assert starts == [1, 2, 3, 4]
    for number in (2, 3, 4):  # each after the one before it ended: never overlapping
        assert witness.stamp("end", number - 1) < witness.stamp("start", number)
    records = {record.instant: record for record in history.runs(task.target)}
    assert {at: r.state for at, r in records.items()} == {
        T0 + n * MINUTE: RunState.SUCCEEDED for n in range(4)
    }
    assert {records[T0 + n * MINUTE].node for n in (1, 3)} == {"b"}


def _cancel_task() -> ScheduledDescriptor:
    """A `cancel_other` task: its runs look for a request every 0.2 s (a third of the TTL)."""
    name = f"tests.overlap_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(
        target=name, lock_name=name, lock_ttl=0.6, fixed_rate=60.0, overlap="cancel_other"
    )


def test_cancel_other_asks_a_plain_body_on_the_other_node_to_stop_then_runs_the_newer_fire(
    nodes: tuple[Node, Node], history: SqlRunHistory, tmp_path: Path
) -> None:
    a, b = nodes
    task = _cancel_task()
    witness = Witness(tmp_path / "witness")

    def running() -> None:
        witness.write("start", 1, "a")
        context = current_fire()
        assert context is not None
        give_up = time.monotonic() + PATIENCE
        while not context.cancel_requested:  # only the backend can tell it
            assert time.monotonic() < give_up, "the request never reached the body"
            time.sleep(0.01)
        witness.write("end", 1, "a")

    newer = witness.quick(2, "b")

    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(a.run, _fire(task, 1), running)
        witness.wait_for("start", 1)
        replaced = b.run(_fire(task, 2), newer)
        stopped = first.result(timeout=PATIENCE)

    assert (stopped.verdict, replaced.verdict) == (Verdict.CANCELLED, Verdict.SUCCEEDED)
    assert witness.stamp("end", 1) < witness.stamp("start", 2)
    records = {record.instant: record for record in history.runs(task.target)}
    assert {at: (r.state, r.node) for at, r in records.items()} == {
        T0: (RunState.CANCELLED, "a"),
        T0 + MINUTE: (RunState.SUCCEEDED, "b"),
    }
    assert records[T0].error == CANCELLED_BY_A_NEWER_FIRE


def test_cancel_other_cancels_a_coroutine_body_on_an_asyncio_node(
    backend: str,
    redis_url: str,
    postgres_url: str,
    nodes: tuple[Node, Node],
    history: SqlRunHistory,
    tmp_path: Path,
) -> None:
    _, b = nodes
    task = _cancel_task()
    witness = Witness(tmp_path / "witness")

    async def coroutine_body() -> None:
        witness.write("start", 1, "async")
        try:
            await asyncio.sleep(PATIENCE)
        except asyncio.CancelledError:
            witness.write("cancelled", 1, "async")
            raise

    async def on_asyncio() -> FireResult:
        lock = (
            AsyncRedisLock(redis_url) if backend == "redis" else AsyncPgAdvisoryLock(postgres_url)
        )
        node = AsyncFireRunner(
            lock,
            history=SqlRunHistory(postgres_url, table=history.table.name),
            clock=lambda: T0,
            node="async",
            owns_history=True,
        )
        try:
            return await node.run(_fire(task, 1), coroutine_body)
        finally:
            await node.aclose()

    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(asyncio.run, on_asyncio())
        witness.wait_for("start", 1)
        replaced = b.run(_fire(task, 2), lambda: witness.write("start", 2, "b"))
        stopped = first.result(timeout=PATIENCE)

    assert (stopped.verdict, replaced.verdict) == (Verdict.CANCELLED, Verdict.SUCCEEDED)
    assert witness.stamp("cancelled", 1) < witness.stamp("start", 2)
    states = {record.instant: record.state for record in history.runs(task.target)}
    assert states == {T0: RunState.CANCELLED, T0 + MINUTE: RunState.SUCCEEDED}
