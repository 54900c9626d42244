"""PgAdvisoryLock when its server session dies: `pg_terminate_backend` of its own backend.

Only the lock's own backend is terminated (found through `pg_locks`), never anyone
else's session on the shared server.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from firefly_scheduling import LockBackendError
from firefly_scheduling_postgres import PgAdvisoryLock


@pytest.fixture
def admin(postgres_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(postgres_url, autocommit=True, connect_timeout=5) as connection:
        yield connection


@pytest.fixture
def name() -> str:
    return f"pg-session-loss:{uuid.uuid4().hex}"


@pytest.fixture
def locks(postgres_url: str) -> Iterator[tuple[PgAdvisoryLock, PgAdvisoryLock]]:
    lock, other = PgAdvisoryLock(postgres_url), PgAdvisoryLock(postgres_url)
    yield lock, other
    lock.close()
    other.close()


def holder_pids(admin: psycopg.Connection[tuple[object, ...]], name: str) -> list[int]:
    """Backends holding the advisory lock of `name` in this database."""
    unsigned = PgAdvisoryLock.key(name) & 0xFFFF_FFFF_FFFF_FFFF
    rows = admin.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
        " AND classid = %s::oid AND objid = %s::oid"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        (unsigned >> 32, unsigned & 0xFFFF_FFFF),
    ).fetchall()
    return [int(str(row[0])) for row in rows]


def terminate_holder(admin: psycopg.Connection[tuple[object, ...]], name: str) -> int:
    """Terminate the one backend holding `name` and wait until the server freed its locks."""
    [pid] = holder_pids(admin, name)
    assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
    deadline = time.monotonic() + 10
    while holder_pids(admin, name):
        assert time.monotonic() < deadline, "the terminated backend kept its advisory lock"
        time.sleep(0.02)
    return pid


def test_next_acquire_raises_marks_the_lock_lost_and_then_reconnects(
    admin: psycopg.Connection[tuple[object, ...]],
    locks: tuple[PgAdvisoryLock, PgAdvisoryLock],
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lock, other = locks
    assert lock.try_acquire(name, 30)
    old_pid = terminate_holder(admin, name)

    with pytest.raises(LockBackendError, match="postgres lock backend") as caught:
        lock.try_acquire(name + ":next", 30)
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)
    assert lock.is_lost(name)
    assert lock.renew(name, 30) is False
    assert f"lock {name!r} is lost" in caplog.text

    assert other.try_acquire(name, 30), "the server freed the lock with the session"
    other_pids = holder_pids(admin, name)
    assert lock.try_acquire(name + ":next", 30), "the call after the failure must reconnect"
    assert holder_pids(admin, name + ":next") not in ([], [old_pid])

    lock.release(name)  # the lost holding: forgotten without a round trip
    assert holder_pids(admin, name) == other_pids
    other.release(name)
    lock.release(name + ":next")


def test_renew_detects_the_lost_session_without_any_other_call(
    admin: psycopg.Connection[tuple[object, ...]],
    locks: tuple[PgAdvisoryLock, PgAdvisoryLock],
    name: str,
) -> None:
    lock, _ = locks
    assert lock.try_acquire(name, 30)
    assert lock.renew(name, 30) is True
    terminate_holder(admin, name)

    assert lock.renew(name, 30) is False
    assert lock.is_lost(name)
    assert lock.is_held(name) is False
    assert lock.try_acquire(name + ":after", 30), "the next call reconnects"
    lock.release(name + ":after")


def test_release_on_a_dead_session_reports_it_lost_and_frees_the_name_locally(
    admin: psycopg.Connection[tuple[object, ...]],
    locks: tuple[PgAdvisoryLock, PgAdvisoryLock],
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lock, _ = locks
    assert lock.try_acquire(name, 30)
    holding = lock.holding(name)
    assert holding is not None
    terminate_holder(admin, name)

    with caplog.at_level(logging.WARNING, logger="firefly_scheduling.locks"):
        lock.release(name)
    # The server freed it while it was held: lost, not released (another may have run).
    assert holding.lost
    assert "ended" in caplog.text, "the session's end is named as the cause"
    assert "was lost before release" in caplog.text
    assert lock.try_acquire(name, 30), "after the release the instance may take it again"
    assert len(holder_pids(admin, name)) == 1
    lock.release(name)
    assert holder_pids(admin, name) == []


def test_fenced_acquire_on_a_dead_session_raises_then_recovers(
    admin: psycopg.Connection[tuple[object, ...]],
    locks: tuple[PgAdvisoryLock, PgAdvisoryLock],
    name: str,
) -> None:
    lock, _ = locks
    first = lock.try_acquire_fenced(name, 30)
    assert first is not None
    terminate_holder(admin, name)

    with pytest.raises(LockBackendError):
        lock.try_acquire_fenced(name + ":next", 30)
    lock.release(name)
    second = lock.try_acquire_fenced(name, 30)
    assert second is not None
    assert second > first
    lock.release(name)


def test_a_lost_holdings_late_release_never_frees_the_newer_holding_of_the_new_session(
    admin: psycopg.Connection[tuple[object, ...]],
    locks: tuple[PgAdvisoryLock, PgAdvisoryLock],
    name: str,
) -> None:
    """Issue 8.1 on a session backend: the name is taken again on the next session."""
    lock, other = locks
    first = lock.acquire(name, 30)
    assert first is not None
    terminate_holder(admin, name)
    assert lock.renew_holding(first, 30) is False  # the loss is noticed
    assert first.lost
    second = lock.acquire(name, 30)
    assert second is not None, "the instance takes the name again on a new session"
    lock.release_holding(first)  # the old holding's late release
    assert lock.renew_holding(first, 30) is False
    assert other.try_acquire(name, 30) is False, "a lost holding's release freed the newer"
    assert lock.renew_holding(second, 30) is True
    lock.release_holding(second)
    assert other.try_acquire(name, 30)
    other.release(name)
