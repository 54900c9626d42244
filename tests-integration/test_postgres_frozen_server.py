"""A PostgreSQL server that never answers ends the lock's call within a bound.

Found by `benchmarks/chaos.py` (seed 120402): a resident node on the `database`
backend logged nothing and reported no outcome for 26 s after a network fault,
until it was killed. Its claimer thread, which every locked fire goes through, was
waiting for a reply that never came. psycopg has no client-side read timeout; the
server's `statement_timeout` never runs for a request the server is not working
on; and TCP's keep-alives and `tcp_user_timeout` see a healthy connection, since
the peer's kernel acknowledges every segment. So the wait had no end, and one
silent connection stopped the whole node.

The fault here is real: a second client finds the server process that serves the
lock's session (by the session's `application_name`) and stops it with SIGSTOP, a
frozen server. The kernel keeps acknowledging what the client sends. The call on
that session must end within the reply bound (`reply_deadline`), by replacing the
session (a fresh one answers) or with `LockBackendError`; on main it waited until
the process was continued.

The test needs the server on this machine, as root may signal its processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from firefly_scheduling.aio import AsyncBaseLock
from firefly_scheduling.concurrency.reply_deadline import ReplyDeadline
from firefly_scheduling.concurrency.reply_deadline_async import AsyncReplyDeadline
from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.locks import BaseLock
from firefly_scheduling_database import AsyncDatabaseLeaseLock, DatabaseLeaseLock
from firefly_scheduling_postgres import AsyncPgAdvisoryLock, PgAdvisoryLock

#: The reply deadline these tests run with. The shipped one is `REPLY_TIMEOUT_SECONDS`
#: (10 s, `locks.reply_deadline`), which each of the four cases also met when it was
#: written (10.0 s each); a shorter one keeps CI's run shorter, by the same mechanism.
DEADLINE_SECONDS = 2.0
#: How long past the deadline the call may take: a reconnect and one statement.
SLACK_SECONDS = 15.0


@pytest.fixture(autouse=True)
def _short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    for mixin in (ReplyDeadline, AsyncReplyDeadline):
        monkeypatch.setattr(mixin, "reply_timeout_seconds", DEADLINE_SECONDS)


def _named(url: str, application: str) -> str:
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}application_name={application}"


@pytest.fixture
def application(postgres_url: str) -> str:
    """A new `application_name` for the test's sessions, which a test freezes by it:
    skipped unless the server runs on this machine, where its processes can be stopped."""
    host = urlsplit(postgres_url).hostname
    if host not in {"127.0.0.1", "localhost", "::1"}:
        pytest.skip(f"freezing a server process needs the server on this machine, not {host}")
    return f"frozen-{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def _frozen(url: str, application: str) -> Iterator[list[int]]:
    """SIGSTOP every server process serving `application`; SIGCONT them on the way out."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application,)
        ).fetchall()
    pids = [int(pid) for (pid,) in rows]
    assert pids, f"no server session of {application!r}"
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _call_within(call: Callable[[], Any], seconds: float) -> tuple[float, Any]:
    """Run `call` in a thread; its duration and result (or exception), or fail after `seconds`."""
    outcome: list[Any] = []

    def run() -> None:
        started = time.monotonic()
        try:
            result: Any = call()
        except Exception as err:  # noqa: BLE001 - the outcome under test
            result = err
        outcome.append((time.monotonic() - started, result))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the call waited more than {seconds} s for a frozen server"
    took, result = outcome[0]
    return took, result


LOCKS: dict[str, Callable[[str], BaseLock]] = {
    "postgres": PgAdvisoryLock,
    "database": DatabaseLeaseLock,
}
ASYNC_LOCKS: dict[str, Callable[[str], AsyncBaseLock]] = {
    "postgres": AsyncPgAdvisoryLock,
    "database": AsyncDatabaseLeaseLock,
}
#: The longest the call under test may take.
BOUND_SECONDS = DEADLINE_SECONDS + SLACK_SECONDS


def _assert_ended_by_the_bound(took: float, result: Any) -> None:
    """A fresh session answered (True), or the call failed as a backend error."""
    assert result is True or isinstance(result, LockBackendError), result
    assert took >= DEADLINE_SECONDS * 0.9, f"ended after {took:.1f} s: was it frozen?"


@pytest.mark.parametrize("backend", sorted(LOCKS))
def test_a_call_to_a_frozen_server_ends_within_the_reply_bound(
    backend: str, postgres_url: str, application: str
) -> None:
    lock = LOCKS[backend](_named(postgres_url, application))
    try:
        if isinstance(lock, DatabaseLeaseLock):
            lock.install()  # its tables, once; safe to run again
        warm = f"warm-{uuid.uuid4().hex[:8]}"
        assert lock.try_acquire(warm, 30)  # the session is open
        lock.release(warm)
        name = f"frozen-{uuid.uuid4().hex[:8]}"
        with _frozen(postgres_url, application):
            took, result = _call_within(lambda: lock.try_acquire(name, 30), BOUND_SECONDS)
        _assert_ended_by_the_bound(took, result)
    finally:
        lock.close()


@pytest.mark.parametrize("backend", sorted(ASYNC_LOCKS))
def test_an_asyncio_call_to_a_frozen_server_ends_within_the_reply_bound(
    backend: str, postgres_url: str, application: str
) -> None:
    name = f"frozen-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[float, Any]:
        lock = ASYNC_LOCKS[backend](_named(postgres_url, application))
        try:
            if isinstance(lock, AsyncDatabaseLeaseLock):
                await lock.install()
            warm = f"warm-{uuid.uuid4().hex[:8]}"
            assert await lock.try_acquire(warm, 30)
            await lock.release(warm)
            with _frozen(postgres_url, application):
                started = time.monotonic()
                try:
                    result: Any = await lock.try_acquire(name, 30)
                except LockBackendError as err:
                    result = err
                return time.monotonic() - started, result
        finally:
            await lock.aclose()

    _, result = _call_within(lambda: asyncio.run(scenario()), BOUND_SECONDS)
    assert isinstance(result, tuple), result
    _assert_ended_by_the_bound(*result)
