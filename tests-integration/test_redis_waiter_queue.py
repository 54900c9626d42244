"""The Redis waiters' queue on a real server and a real cluster, read by a second client.

Waiters in separate processes, queued in a known order (each one's ticket seen on the
server before the next starts), are served in that order: the processes log while
they hold the lock, and their fencing tokens, counted by the server, rise in the same
order. Without the queue every release's message starts a race among them. A waiter
killed while queued holds the queue only until its ticket lapses; a wait that ends
without the lock leaves no ticket behind.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.cluster

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.testing.leader_workers import queued_waiter, read_events
from firefly_scheduling.testing.workers import child_processes
from firefly_scheduling_redis import RedisLock, waiter_queue
from firefly_scheduling_redis.protocol import fence_key, lock_key
from firefly_scheduling_redis.url import parse_url

WAITERS = 4


@pytest.fixture(params=["redis_url", "redis_cluster_url"])
def url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(request.param))


@pytest.fixture
def admin(url: str) -> Iterator[Any]:
    """A plain client of the same server, as an operator would read it."""
    server = parse_url(url)
    client: Any = (
        redis.cluster.RedisCluster.from_url(server.driver_url)
        if server.cluster
        else redis.Redis.from_url(server.driver_url)
    )
    yield client
    client.close()


@pytest.fixture
def name() -> str:
    return f"queue-{uuid.uuid4().hex}"


def _tickets(admin: Any, url: str, name: str) -> int:
    return int(admin.zcard(waiter_queue.queue_key(name, cluster=parse_url(url).cluster)))


def _queued(admin: Any, url: str, name: str, count: int) -> bool:
    return _tickets(admin, url, name) == count


def _queue_keys_left(admin: Any, url: str, name: str) -> int:
    cluster = parse_url(url).cluster
    queue = waiter_queue.queue_key(name, cluster=cluster)
    deadlines = waiter_queue.deadlines_key(name, cluster=cluster)
    return int(admin.exists(queue)) + int(admin.exists(deadlines))


def test_waiters_of_separate_processes_are_served_in_arrival_order(
    url: str, admin: Any, name: str, tmp_path: Path
) -> None:
    holder = RedisLock(url)
    held = holder.acquire(name, 60, fenced=True)
    assert held is not None
    assert held.fence is not None
    log = str(tmp_path / "events")
    Path(log).write_text("")
    context = child_processes()
    children = []
    try:
        for arrived in range(1, WAITERS + 1):
            child = context.Process(target=queued_waiter, args=(partial(RedisLock, url), name, log))
            child.start()
            children.append(child)
            _until(partial(_queued, admin, url, name, arrived), 60)
        holder.release_holding(held)
        for child in children:
            child.join(120)
            assert child.exitcode == 0, f"a waiter ended with {child.exitcode}"
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
        holder.close()
    served = read_events(log)
    assert [pid for _, pid, _ in served] == [child.pid for child in children], served
    tokens = [int(event.removeprefix("won:")) for event, _, _ in served]
    assert tokens == [held.fence + n for n in range(1, WAITERS + 1)], tokens
    assert int(admin.get(fence_key(name, cluster=parse_url(url).cluster))) == tokens[-1]
    assert _queue_keys_left(admin, url, name) == 0, "the served waiters left their tickets"


def test_a_killed_waiters_ticket_lapses_and_the_next_waiter_wins(
    url: str, admin: Any, name: str, tmp_path: Path
) -> None:
    holder, survivor = RedisLock(url), RedisLock(url)
    held = holder.acquire(name, 60)
    assert held is not None
    log = str(tmp_path / "events")
    Path(log).write_text("")
    doomed = child_processes().Process(
        target=queued_waiter, args=(partial(RedisLock, url), name, log)
    )
    doomed.start()
    won: list[Holding | None] = []
    try:
        _until(lambda: _tickets(admin, url, name) == 1, 60)
        waiting = threading.Thread(target=lambda: won.append(survivor.acquire(name, 60, wait=60)))
        waiting.start()
        _until(lambda: _tickets(admin, url, name) == 2, 30)
        assert doomed.pid is not None
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.join(30)
        holder.release_holding(held)  # the dead ticket is first: only its lapse frees the turn
        waiting.join(60)
        assert won, "the live waiter's wait never returned"
        assert won[0] is not None, "the live waiter never won behind a dead ticket"
        assert read_events(log) == [], "the killed waiter won before it was killed"
        assert _queue_keys_left(admin, url, name) == 0, "the dead ticket is still queued"
        survivor.release_holding(won[0])
    finally:
        if doomed.is_alive():
            doomed.kill()
        holder.close()
        survivor.close()


def test_a_wait_that_times_out_leaves_no_ticket(url: str, admin: Any, name: str) -> None:
    holder, waiter = RedisLock(url), RedisLock(url)
    try:
        held = holder.acquire(name, 60)
        assert held is not None
        assert waiter.acquire(name, 60, wait=0.5) is None
        assert _queue_keys_left(admin, url, name) == 0, "the timed-out wait left its ticket"
        holder.release_holding(held)
    finally:
        holder.close()
        waiter.close()


def test_a_try_takes_a_free_name_whatever_the_queue_holds(url: str, admin: Any, name: str) -> None:
    """A try (`wait=0`) never reads the queue: a ticket queued by a waiter that has not
    yet tried again does not stop it."""
    holder, waiter, trier = RedisLock(url), RedisLock(url), RedisLock(url)
    waiter.notified_recheck_seconds = 3600.0
    won: list[Holding | None] = []
    try:
        held = holder.acquire(name, 60)
        assert held is not None
        waiting = threading.Thread(target=lambda: won.append(waiter.acquire(name, 60, wait=60)))
        waiting.start()
        _until(lambda: _tickets(admin, url, name) == 1, 30)
        assert admin.delete(lock_key(name, cluster=parse_url(url).cluster)) == 1
        # The lease is gone without a release: no message, and the waiter sleeps on.
        trial = trier.acquire(name, 60)
        assert trial is not None, "a try was refused because a waiter was queued"
        trier.release_holding(trial)  # its message wakes the waiter, which then wins
        waiting.join(60)
        assert won, "the waiter's wait never returned"
        assert won[0] is not None, "the try's release did not wake the queued waiter"
        waiter.release_holding(won[0])
    finally:
        holder.close()
        waiter.close()
        trier.close()


def _until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.02)
