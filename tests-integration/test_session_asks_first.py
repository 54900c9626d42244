"""A release or a keep-alive check waiting for its session is served before the next
acquisition takes that session, on PostgreSQL and MariaDB (the thread flavour).

A held session lock can only be checked and released on the session that holds it,
while an acquisition may use any session. A waiting acquisition holds a session for
one slice at a time and then asks for one again, at once; on a loaded machine the
thread that waits for that very session (to release a lock on it) was not scheduled
in between, so it lost the session to every next slice until the pool timeout, and
the lock stayed held on the server that long. Two overlapping fires on one node
hung that way: the released task lock never reached the server.

The CPU is kept busy by processes that only spin, so that a woken thread waits for a
core as it does on a loaded machine; what is checked is the server's view, by a
second client.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from firefly_scheduling.locks.session import SessionLock
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_postgres import PgAdvisoryLock

#: How long a release may wait for its session before it is queued (shortened).
POOL_TIMEOUT = 2.0
ROUNDS = 5


@pytest.fixture(params=["postgres", "mysql"])
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return str(request.getfixturevalue("mysql_database_url"))


def _session_lock(url: str) -> SessionLock[Any]:
    lock: SessionLock[Any] = (
        PgAdvisoryLock(url) if url.startswith("postgresql") else MySqlNamedLock(url)
    )
    lock.pool_timeout_seconds = POOL_TIMEOUT  # type: ignore[misc]  # shortened for this test
    return lock


@pytest.fixture
def busy_cpus() -> Iterator[None]:
    """Two spinning processes per core while the test runs."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_a_release_is_not_starved_by_an_acquisition_waiting_on_its_session(
    url: str, busy_cpus: None
) -> None:
    lock, other, third = _session_lock(url), _session_lock(url), _session_lock(url)
    blocker = f"asks-first:{uuid.uuid4().hex}:blocker"
    try:
        assert other.try_acquire(blocker, 30)  # what the waiter waits for, all along
        stop = threading.Event()

        def waiter() -> None:  # slice after slice, on any free session of `lock`
            while not stop.is_set():
                if lock.acquire(blocker, 30, wait=0.5) is not None:
                    raise AssertionError("the blocker was taken from its other holder")

        for each in range(ROUNDS):
            name = f"asks-first:{uuid.uuid4().hex}:{each}"
            assert lock.try_acquire(name, 30)
            stop.clear()
            waiting = threading.Thread(target=waiter, daemon=True)
            waiting.start()
            time.sleep(0.3)  # the waiter is in a slice: the sessions take turns from here
            lock.release(name)
            # The server's view: free at once, not after the pool timeout (queued).
            assert third.try_acquire(name, 30), (
                f"round {each}: the release never reached the server"
            )
            third.release(name)
            stop.set()
            waiting.join(timeout=30)
            assert not waiting.is_alive()
    finally:
        for client in (lock, other, third):
            client.close()
