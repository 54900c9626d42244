"""MySqlNamedLock when its server session dies: `KILL` of its own connection.

Only the lock's own connection is killed (found through `IS_USED_LOCK` of its server
name), never anyone else's session on the shared server.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pymysql
import pytest

from firefly_scheduling import LockBackendError
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.lock import Connection as Admin
from firefly_scheduling_mysql.url import connection_arguments


@pytest.fixture
def admin(mysql_url: str) -> Iterator[Admin]:
    connection: Admin = pymysql.connect(**connection_arguments(mysql_url), autocommit=True)
    yield connection
    connection.close()


@pytest.fixture
def name() -> str:
    return f"mysql-session-loss:{uuid.uuid4().hex}"


@pytest.fixture
def locks(mysql_url: str) -> Iterator[tuple[MySqlNamedLock, MySqlNamedLock]]:
    lock, other = MySqlNamedLock(mysql_url), MySqlNamedLock(mysql_url)
    yield lock, other
    lock.close()
    other.close()


def holder_id(admin: Admin, name: str) -> int | None:
    """The connection id holding the named lock of `name`, if any."""
    with admin.cursor() as cursor:
        cursor.execute("SELECT IS_USED_LOCK(%s)", (MySqlNamedLock.server_name(name),))
        row = cursor.fetchone()
    assert row is not None
    return None if row[0] is None else int(row[0])


def kill_holder(admin: Admin, name: str) -> int:
    """Kill the one connection holding `name` and wait until the server freed its lock."""
    connection_id = holder_id(admin, name)
    assert connection_id is not None, f"nobody holds {name!r}"
    with admin.cursor() as cursor:
        cursor.execute("KILL %s", (connection_id,))
    deadline = time.monotonic() + 10
    while holder_id(admin, name) is not None:
        assert time.monotonic() < deadline, "the killed connection kept its named lock"
        time.sleep(0.02)
    return connection_id


def test_renew_reports_the_loss_and_release_forgets_the_lock(
    admin: Admin,
    locks: tuple[MySqlNamedLock, MySqlNamedLock],
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lock, other = locks
    assert lock.try_acquire(name, 30)
    assert lock.renew(name, 30) is True
    kill_holder(admin, name)

    assert lock.renew(name, 30) is False
    assert lock.is_lost(name)
    assert lock.is_held(name) is False
    assert f"lock {name!r} is lost" in caplog.text

    assert other.try_acquire(name, 30), "the server freed the lock with the session"
    lock.release(name)  # never raises, and must not free the new holder
    assert holder_id(admin, name) is not None
    assert lock.try_acquire(name, 30) is False, "a fresh session is refused: other holds it"
    other.release(name)
    assert lock.try_acquire(name, 30), "the instance reconnected"
    lock.release(name)


def test_a_lost_holdings_late_release_never_frees_the_newer_holding_of_the_new_session(
    admin: Admin,
    locks: tuple[MySqlNamedLock, MySqlNamedLock],
    name: str,
) -> None:
    """Issue 8.1 on a session backend: the name is taken again on the next session."""
    lock, other = locks
    first = lock.acquire(name, 30)
    assert first is not None
    kill_holder(admin, name)
    assert lock.renew_holding(first, 30) is False  # the loss is noticed
    assert first.lost
    second = lock.acquire(name, 30)
    assert second is not None, "the instance takes the name again on a new session"
    lock.release_holding(first)  # the old holding's late release
    assert other.try_acquire(name, 30) is False, "a lost holding's release freed the newer"
    assert lock.renew_holding(second, 30) is True
    lock.release_holding(second)
    assert other.try_acquire(name, 30)
    other.release(name)


def test_next_acquire_raises_marks_the_lock_lost_and_then_reconnects(
    admin: Admin,
    locks: tuple[MySqlNamedLock, MySqlNamedLock],
    name: str,
) -> None:
    lock, other = locks
    assert lock.try_acquire(name, 30)
    old_id = kill_holder(admin, name)

    with pytest.raises(LockBackendError, match="mysql lock backend") as caught:
        lock.try_acquire(name + ":next", 30)
    assert isinstance(caught.value.__cause__, pymysql.err.OperationalError)
    assert lock.is_lost(name)

    assert lock.try_acquire(name + ":next", 30), "the call after the failure reconnects"
    new_id = holder_id(admin, name + ":next")
    assert new_id is not None
    assert new_id != old_id
    assert other.try_acquire(name, 30), "the killed session's lock was freed"
    lock.release(name)  # the lost lease: forgotten, and other keeps the lock
    assert holder_id(admin, name) not in (None, new_id)
    lock.release(name + ":next")
    other.release(name)


def test_killed_session_during_release_is_reported_lost_not_raised(
    admin: Admin,
    locks: tuple[MySqlNamedLock, MySqlNamedLock],
    name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lock, other = locks
    assert lock.try_acquire(name, 30)
    holding = lock.holding(name)
    assert holding is not None
    kill_holder(admin, name)
    lock.release(name)
    # The server freed it while it was held: lost, not released (another may have run).
    assert holding.lost
    assert "was lost before release" in caplog.text
    assert lock.is_held(name) is False
    assert lock.try_acquire(name, 30), "the released name can be taken again"
    assert other.try_acquire(name, 30) is False
    lock.release(name)
