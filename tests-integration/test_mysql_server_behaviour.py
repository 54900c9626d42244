"""MySqlNamedLock against server quirks: session identity, re-entrancy, names, fencing.

What the server sees is read from a separate admin connection (`IS_USED_LOCK`), so
these tests check the server state, not only what the lock object believes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import pymysql
import pytest

from firefly_scheduling import LockBackendError
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql import protocol as sql_statements
from firefly_scheduling_mysql.driver import Connection as Admin
from firefly_scheduling_mysql.protocol import FENCE_TABLE
from firefly_scheduling_mysql.url import connection_arguments


@pytest.fixture
def admin(mysql_url: str) -> Iterator[Admin]:
    connection: Admin = pymysql.connect(**connection_arguments(mysql_url), autocommit=True)
    yield connection
    connection.close()


@pytest.fixture
def name() -> str:
    return f"mysql-behaviour:{uuid.uuid4().hex}"


@pytest.fixture
def nodes(mysql_url: str) -> Iterator[Callable[..., MySqlNamedLock]]:
    """Make independent instances (for `mysql_url` or a given URL); close them all after."""
    made: list[MySqlNamedLock] = []

    def make(url: str = mysql_url) -> MySqlNamedLock:
        made.append(MySqlNamedLock(url))
        return made[-1]

    yield make
    for lock in made:
        lock.close()


def query(admin: Admin, statement: str, *args: object) -> object:
    with admin.cursor() as cursor:
        cursor.execute(statement, args or None)
        row = cursor.fetchone()
    assert row is not None
    return row[0]


def holder_id(admin: Admin, name: str) -> object:
    """The connection id holding the server lock of `name` (None when free)."""
    return query(admin, "SELECT IS_USED_LOCK(%s)", MySqlNamedLock.server_name(name))


# -- sessions and re-entrancy -----------------------------------------------------------


def test_two_instances_never_share_a_session(
    admin: Admin, nodes: Callable[..., MySqlNamedLock], name: str
) -> None:
    first, second = nodes(), nodes()
    assert first.try_acquire(name + ":a", 30)
    assert second.try_acquire(name + ":b", 30)
    first_id, second_id = holder_id(admin, name + ":a"), holder_id(admin, name + ":b")
    assert first_id is not None
    assert second_id is not None
    assert first_id != second_id, "two instances must hold their locks in two sessions"
    # The server's lock is re-entrant per session: sharing one would let `second` in here.
    assert second.try_acquire(name + ":a", 30) is False
    assert holder_id(admin, name + ":a") == first_id


def test_refused_reacquire_never_raises_the_server_count(
    admin: Admin, nodes: Callable[..., MySqlNamedLock], name: str
) -> None:
    lock = nodes()
    assert lock.try_acquire(name, 30)
    assert lock.try_acquire(name, 30) is False
    lock.release(name)
    assert holder_id(admin, name) is None, "one release must free the server lock"


def test_one_session_holds_several_names_at_once(
    admin: Admin, nodes: Callable[..., MySqlNamedLock], name: str
) -> None:
    """MySQL before 5.7 freed a session's lock when it took another: refused at connect."""
    lock = nodes()
    names = [f"{name}:{index}" for index in range(5)]
    for each in names:
        assert lock.try_acquire(each, 30)
    holders = {holder_id(admin, each) for each in names}
    assert len(holders) == 1
    assert None not in holders


def test_release_of_a_lock_the_session_no_longer_holds_is_reported_lost(
    nodes: Callable[..., MySqlNamedLock], name: str, caplog: pytest.LogCaptureFixture
) -> None:
    lock, other = nodes(), nodes()
    assert lock.try_acquire(name, 30)
    # Free the server lock behind the instance's back, on its own session, so that its
    # RELEASE_LOCK answers NULL ("no such lock").
    connection = lock._connection_of(name)
    assert connection is not None
    assert query(connection, "SELECT RELEASE_LOCK(%s)", MySqlNamedLock.server_name(name)) == 1
    assert other.try_acquire(name, 30)
    lock.release(name)
    assert "was lost before release" in caplog.text
    assert lock.try_acquire(name, 30) is False, "the stale release freed the new holder"


# -- names ------------------------------------------------------------------------------


def test_case_and_trailing_space_variants_hold_distinct_server_locks(
    admin: Admin, nodes: Callable[..., MySqlNamedLock], name: str
) -> None:
    variants = [name + ":report", name + ":Report", name + ":REPORT", name + ":report "]
    holders = [nodes() for _ in variants]
    for holder, variant in zip(holders, variants, strict=True):
        assert holder.try_acquire(variant, 30), f"{variant!r} was merged with another name"
    assert len({holder_id(admin, variant) for variant in variants}) == len(variants)


@pytest.mark.parametrize("suffix", ["x" * 200, ":überprüfung-日本語", ":Report"])
def test_hashed_names_are_what_the_server_holds(
    admin: Admin, nodes: Callable[..., MySqlNamedLock], name: str, suffix: str
) -> None:
    long_or_unsafe = (name + suffix)[:255]
    lock = nodes()
    assert lock.try_acquire(long_or_unsafe, 30)
    server_name = MySqlNamedLock.server_name(long_or_unsafe)
    assert server_name.startswith("firefly:")
    assert query(admin, "SELECT IS_FREE_LOCK(%s)", server_name) == 0
    lock.release(long_or_unsafe)
    assert query(admin, "SELECT IS_FREE_LOCK(%s)", server_name) == 1


# -- fencing ----------------------------------------------------------------------------


@pytest.fixture
def scratch_url(admin: Admin, mysql_url: str) -> Iterator[str]:
    """A URL on a fresh, empty database, dropped afterwards."""
    database = f"firefly_mysql_{uuid.uuid4().hex[:12]}"
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {database}")
    parts = urlsplit(mysql_url)
    yield urlunsplit(parts._replace(path=f"/{database}"))
    with admin.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {database}")


def test_fence_table_is_created_on_first_fenced_use(
    admin: Admin, nodes: Callable[..., MySqlNamedLock], scratch_url: str, name: str
) -> None:
    database = urlsplit(scratch_url).path.lstrip("/")
    exists = (
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
    )
    lock = nodes(scratch_url)
    assert lock.try_acquire(name, 30)
    assert query(admin, exists, database, FENCE_TABLE) == 0, "plain locks need no table"
    lock.release(name)
    assert lock.try_acquire_fenced(name, 30) == 1
    assert query(admin, exists, database, FENCE_TABLE) == 1
    lock.release(name)
    assert nodes(scratch_url).try_acquire_fenced(name, 30) == 2


def test_fence_counters_never_merge_case_or_trailing_space_variants(
    nodes: Callable[..., MySqlNamedLock], scratch_url: str, name: str
) -> None:
    variants = [name + ":job", name + ":Job", name + ":JOB", name + ":job "]
    tokens: dict[str, list[int | None]] = {}
    for variant in variants * 3:
        lock = nodes(scratch_url)
        tokens.setdefault(variant, []).append(lock.try_acquire_fenced(variant, 30))
        lock.release(variant)
    assert tokens == {variant: [1, 2, 3] for variant in variants}


def test_fence_failure_never_leaves_the_lock_held(
    admin: Admin, nodes: Callable[..., MySqlNamedLock], mysql_url: str, name: str
) -> None:
    """Without a database the fence table cannot exist; the lock must not outlive that."""
    no_database = urlunsplit(urlsplit(mysql_url)._replace(path=""))
    lock = nodes(no_database)
    with pytest.raises(LockBackendError, match="mysql lock backend"):
        lock.try_acquire_fenced(name, 30)
    assert lock.is_held(name) is False
    assert holder_id(admin, name) is None
    assert nodes().try_acquire(name, 30)


def test_a_refused_fenced_acquire_consumes_no_token(
    nodes: Callable[..., MySqlNamedLock], scratch_url: str, name: str
) -> None:
    """GET_LOCK and the counter are one statement: the row is written only when it won."""
    holder, contender = nodes(scratch_url), nodes(scratch_url)
    assert holder.try_acquire_fenced(name, 30) == 1
    assert contender.try_acquire_fenced(name, 30) is None
    assert contender.is_held(name) is False
    holder.release(name)
    assert contender.try_acquire_fenced(name, 30) == 2
    assert holder._fence(name) == 3, "the plain fence hook shares the counter"


def test_batched_answers_are_one_digit_per_name_in_one_column(
    nodes: Callable[..., MySqlNamedLock], admin: Admin
) -> None:
    """A batch of releases, checks or acquisitions is answered per name, NULL included.

    Three names: one this session holds, one another session holds, one free. The
    statements answer in one column (`statements.answers_in_one_column`); the admin
    connection reads what the server holds after each.
    """
    lock, other = nodes(), nodes()
    stamp = uuid.uuid4().hex
    mine, theirs, free = (f"mysql-digits:{stamp}:{part}" for part in ("mine", "theirs", "free"))
    assert other.try_acquire(theirs, 30) is not None
    session = lock._connect()
    try:
        assert lock._server_acquire_many(session, [mine, theirs], fenced=False) == {mine: True}
        owner = holder_id(admin, mine)
        assert owner is not None
        assert holder_id(admin, theirs) != owner
        assert lock._server_holds_many(session, [mine, theirs, free]) == [True, False, False]
        assert lock._server_release_many(session, [theirs, mine, free]) == [False, True, False]
        assert holder_id(admin, mine) is None
        assert holder_id(admin, theirs) is not None  # another session's lock is left alone
        with session.cursor() as cursor:
            cursor.execute(sql_statements.release_many(3), [mine, theirs, free])
            assert len(cursor.description) == 1
    finally:
        lock._disconnect(session)
