"""PgAdvisoryLock on a real PostgreSQL: key interop, the pg_locks check, session settings,
and the lazily created fence table."""

from __future__ import annotations

import itertools
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_postgres.protocol import FENCE_TABLE

sys.path.insert(0, str(Path(__file__).resolve().parent))
from threads_together import run_together

Admin = psycopg.Connection[tuple[object, ...]]


@pytest.fixture
def admin(postgres_url: str) -> Iterator[Admin]:
    with psycopg.connect(postgres_url, autocommit=True, connect_timeout=5) as connection:
        yield connection


@pytest.fixture
def name() -> str:
    return f"pg-server:{uuid.uuid4().hex}"


@pytest.fixture
def make_lock() -> Iterator[Callable[[str], PgAdvisoryLock]]:
    made: list[PgAdvisoryLock] = []

    def make(url: str) -> PgAdvisoryLock:
        made.append(PgAdvisoryLock(url))
        return made[-1]

    yield make
    for lock in made:
        lock.close()


def with_options(url: str, options: str) -> str:
    """`url` with a libpq `options` query parameter (`-c setting=value ...`)."""
    encoded = options.replace(" ", "%20").replace("=", "%3D")
    return f"{url}{'&' if '?' in url else '?'}options={encoded}"


def name_with_key_sign(prefix: str, negative: bool) -> str:
    """A fresh name whose key has the wanted sign (half of all names do)."""
    for attempt in itertools.count():
        candidate = f"{prefix}:{attempt}"
        if (PgAdvisoryLock.key(candidate) < 0) == negative:
            return candidate
        assert attempt < 200, "no key of the wanted sign in 200 names"
    raise AssertionError("unreachable")


# -- a mixed fleet ----------------------------------------------------------------


def test_a_raw_advisory_lock_on_the_key_excludes_it_both_ways(
    admin: Admin, make_lock: Callable[[str], PgAdvisoryLock], postgres_url: str, name: str
) -> None:
    """What a PHP node running the original formula does, done here with plain SQL."""
    key = PgAdvisoryLock.key(name)
    lock = make_lock(postgres_url)
    assert admin.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (True,)
    assert lock.try_acquire(name, 30) is False
    assert admin.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone() == (True,)

    assert lock.try_acquire(name, 30)
    assert admin.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (False,)
    lock.release(name)
    assert admin.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (True,)
    admin.execute("SELECT pg_advisory_unlock(%s)", (key,))


def test_postgres_scheme_urls_work_against_the_server(
    make_lock: Callable[[str], PgAdvisoryLock], postgres_url: str, name: str
) -> None:
    short = "postgres://" + postgres_url.split("://", 1)[1]
    first, second = make_lock(short), make_lock(postgres_url)
    assert first.try_acquire(name, 30)
    assert second.try_acquire(name, 30) is False
    first.release(name)


# -- the pg_locks check keep-alive relies on --------------------------------------


@pytest.mark.parametrize("negative", [True, False], ids=["negative-key", "positive-key"])
def test_renew_sees_a_lock_the_session_no_longer_holds(
    make_lock: Callable[[str], PgAdvisoryLock],
    postgres_url: str,
    name: str,
    negative: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lock_name = name_with_key_sign(name, negative)
    lock = make_lock(postgres_url)
    bystander = make_lock(postgres_url)
    assert lock.try_acquire(lock_name, 30)
    assert bystander.try_acquire(lock_name + ":other", 30)
    assert lock.renew(lock_name, 30) is True
    assert bystander.renew(lock_name + ":other", 30) is True

    # No outside session can free another's advisory lock, so free it on the lock's own
    # connection, as a bug or a stray `pg_advisory_unlock_all()` in shared code would.
    connection = lock._connection_of(lock_name)
    assert connection is not None
    connection.execute("SELECT pg_advisory_unlock(%s)", (PgAdvisoryLock.key(lock_name),))

    assert lock.renew(lock_name, 30) is False
    assert lock.is_lost(lock_name)
    assert f"lock {lock_name!r} is lost" in caplog.text
    lock.release(lock_name)  # a lost holding is forgotten without a round trip
    assert bystander.renew(lock_name + ":other", 30) is True, "only the freed lock is lost"


# -- session settings -------------------------------------------------------------


def _setting(lock: PgAdvisoryLock, name: str, setting: str) -> str:
    """`setting` in the session holding `name`."""
    connection = lock._connection_of(name)
    assert connection is not None
    row = connection.execute("SELECT current_setting(%s)", (setting,)).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.parametrize(
    ("in_the_url", "in_the_session"),
    [("0", "5s"), ("7s", "7s")],  # unbounded: bounded; a bound of the URL's own: kept
)
def test_the_statement_timeout_of_the_url_is_kept_unless_unbounded(
    make_lock: Callable[[str], PgAdvisoryLock],
    postgres_url: str,
    name: str,
    in_the_url: str,
    in_the_session: str,
) -> None:
    lock = make_lock(with_options(postgres_url, f"-c statement_timeout={in_the_url}"))
    assert lock.try_acquire(name, 30)
    assert _setting(lock, name, "statement_timeout") == in_the_session
    assert _setting(lock, name, "application_name") == "firefly-scheduling"
    lock.release(name)


def test_a_server_idle_session_timeout_does_not_end_a_holding_session(
    admin: Admin, make_lock: Callable[[str], PgAdvisoryLock], postgres_url: str, name: str
) -> None:
    if admin.info.server_version < 140000:
        pytest.skip("idle_session_timeout exists from PostgreSQL 14")
    lock = make_lock(with_options(postgres_url, "-c idle_session_timeout=300ms"))
    other = make_lock(postgres_url)
    assert lock.try_acquire(name, 30)
    time.sleep(1.0)
    assert lock.renew(name, 30) is True, "the idle session was ended and its lock freed"
    assert other.try_acquire(name, 30) is False
    lock.release(name)


# -- fencing ----------------------------------------------------------------------


@pytest.fixture
def scratch_schema(admin: Admin, postgres_url: str) -> Iterator[str]:
    """A URL whose sessions create the fence table in a fresh, private schema."""
    schema = f"firefly_pg_test_{uuid.uuid4().hex[:12]}"
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield with_options(postgres_url, f"-c search_path={schema}")
    finally:
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_fence_table_is_created_once_by_racing_first_users(
    admin: Admin, make_lock: Callable[[str], PgAdvisoryLock], scratch_schema: str, name: str
) -> None:
    threads = 8
    locks = [make_lock(scratch_schema) for _ in range(threads)]
    tokens: list[int | None] = [None] * threads

    def first_fenced_use(index: int) -> None:
        tokens[index] = locks[index].try_acquire_fenced(f"{name}:{index}", 30)

    assert run_together(first_fenced_use, range(threads), timeout=30) == []
    assert tokens == [1] * threads
    schema = scratch_schema.rsplit("%3D", 1)[1]
    row = admin.execute("SELECT to_regclass(%s)::text", (f"{schema}.{FENCE_TABLE}",)).fetchone()
    assert row == (f"{schema}.{FENCE_TABLE}",)


def test_fence_hook_creates_the_table_too(
    make_lock: Callable[[str], PgAdvisoryLock], scratch_schema: str, name: str
) -> None:
    """The generic acquire-then-fence hook (`_fence`) shares the counter."""
    lock = make_lock(scratch_schema)
    assert lock._fence(name) == 1
    assert lock.try_acquire_fenced(name, 30) == 2
    lock.release(name)
    assert lock._fence(name) == 3


def test_a_refused_fenced_acquire_consumes_no_token(
    make_lock: Callable[[str], PgAdvisoryLock], postgres_url: str, name: str
) -> None:
    holder, contender = make_lock(postgres_url), make_lock(postgres_url)
    first = holder.try_acquire_fenced(name, 30)
    assert first is not None
    for _ in range(3):
        assert contender.try_acquire_fenced(name, 30) is None
    holder.release(name)
    assert contender.try_acquire_fenced(name, 30) == first + 1
    contender.release(name)
