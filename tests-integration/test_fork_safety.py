"""after `os.fork()`, a child never uses its parent's connections or holdings.

A forked child (gunicorn `--preload`, multiprocessing) inherits its parent's
sockets, pooled database connections and the locks' records of what they hold.
Without a fork check the child talked on the parent's memcached socket and database
sessions, and believed it held the parent's leases: its `release(name)` deleted the
parent's lease with the parent's owner token.

Each test forks for real against the real server. The evidence comes from outside
the code under test: the kernel's local port of each process's memcached socket, the
server's own session id (`pg_backend_pid()`, `CONNECTION_ID()`), and a second lock
instance finding the parent's lease still taken.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from firefly_scheduling.history.port import RunState
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.schema import LeaseTables
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_memcached.anchor_store import MemcachedAnchorStore
from firefly_scheduling_memcached.lock import MemcachedLock

CHILD_SECONDS = 60.0


def in_forked_child(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `work` in a forked child; its JSON result, or its error as `{"error": ...}`."""
    reading, writing = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(reading)
        try:
            result = work()
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            result = {"error": f"{type(err).__name__}: {err}"}
        os.write(writing, json.dumps(result).encode())
        os._exit(0)
    os.close(writing)
    answered = False
    try:
        chunks = []
        while True:
            ready, _, _ = select.select([reading], [], [], CHILD_SECONDS)
            assert ready, "the forked child did not answer"
            chunk = os.read(reading, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        answered = True
    finally:
        os.close(reading)
        if not answered:  # a child stuck (on a mutex its parent held) is ended
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return dict(json.loads(b"".join(chunks)))


def _local_port(sock: socket.socket | None) -> int | None:
    return None if sock is None else int(sock.getsockname()[1])


# -- memcached ------------------------------------------------------------------------


def _memcached_port(store: MemcachedLock | MemcachedAnchorStore) -> int | None:
    """The kernel's local port of the instance's (idle) socket (read, never used)."""
    if isinstance(store, MemcachedLock):
        idle = store._pool._idle
        return None if not idle else _local_port(idle[-1]._sock)
    shared: Any = store._client
    return _local_port(getattr(shared, "client", shared).sock)


def test_a_forked_child_neither_holds_nor_frees_the_parents_memcached_lease(
    memcached_url: str,
) -> None:
    name, other = f"fork-{uuid.uuid4().hex}", f"fork-child-{uuid.uuid4().hex}"
    lock = MemcachedLock(memcached_url)
    holding = lock.acquire(name, 30, fenced=True)
    assert holding is not None
    parent_port = _memcached_port(lock)

    def child() -> dict[str, Any]:
        held = lock.is_held(name)
        lock.release(name)  # must not free the parent's lease
        renewed = lock.renew_holding(holding, 30)
        took = lock.try_acquire(name, 30)
        own = lock.try_acquire(other, 30)
        port = _memcached_port(lock)
        lock.release(other)
        return {"held": held, "renewed": renewed, "took": took, "own": own, "port": port}

    seen = in_forked_child(child)

    assert "error" not in seen, seen["error"]
    assert seen == {**seen, "held": False, "renewed": False, "took": False, "own": True}
    assert seen["port"] != parent_port, "the child talked on the parent's socket"
    witness = MemcachedLock(memcached_url)
    try:
        assert not witness.try_acquire(name, 30), "the child freed the parent's lease"
        assert witness.try_acquire(other, 30), "the child's own lease was not released"
        witness.release(other)
    finally:
        witness.close()
    assert lock.renew_holding(holding, 30), "the parent lost its lease"
    assert _memcached_port(lock) == parent_port
    lock.close()


def test_a_forked_child_opens_its_own_memcached_anchor_connection(memcached_url: str) -> None:
    key = f"firefly-test:fork-anchor:{uuid.uuid4().hex}"
    store = MemcachedAnchorStore(memcached_url)
    assert store.add(key, "1.0")
    parent_port = _memcached_port(store)

    def child() -> dict[str, Any]:
        value = store.get(key)
        replaced = store.replace(key, "1.0", "2.0")
        return {"value": value, "replaced": replaced, "port": _memcached_port(store)}

    seen = in_forked_child(child)

    assert seen == {"value": "1.0", "replaced": True, "port": seen["port"]}
    assert seen["port"] != parent_port, "the child talked on the parent's socket"
    assert store.get(key) == "2.0"
    assert _memcached_port(store) == parent_port
    store.close()


# -- database lock and history, on PostgreSQL and MariaDB -------------------------------


@pytest.fixture(params=["postgres", "mariadb"])
def server_url(request: pytest.FixtureRequest) -> str:
    fixture = "postgres_url" if request.param == "postgres" else "mysql_url"
    return str(request.getfixturevalue(fixture))


def _session_id(engine: Engine) -> int:
    """The server's id of the session a pooled connection of `engine` is."""
    query = (
        "SELECT pg_backend_pid()"
        if engine.dialect.name == "postgresql"
        else "SELECT CONNECTION_ID()"
    )
    with engine.connect() as connection:
        return int(connection.exec_driver_sql(query).scalar_one())


@pytest.fixture
def lock_and_history(server_url: str) -> Iterator[tuple[DatabaseLeaseLock, SqlRunHistory]]:
    suffix = uuid.uuid4().hex[:10]
    lock = DatabaseLeaseLock(server_url, table=f"fork_locks_{suffix}")
    lock.install()
    history = SqlRunHistory(server_url, table=f"fork_runs_{suffix}")
    try:
        yield lock, history
    finally:
        lock.close()
        history.table.drop(history.engine, checkfirst=True)
        history.close()
        engine = sa.create_engine(history.engine.url)
        try:
            for table in LeaseTables.named(f"fork_locks_{suffix}").all:
                table.drop(engine, checkfirst=True)
        finally:
            engine.dispose()


def test_a_forked_child_opens_its_own_database_sessions_and_holds_nothing(
    server_url: str, lock_and_history: tuple[DatabaseLeaseLock, SqlRunHistory]
) -> None:
    from datetime import UTC, datetime  # noqa: PLC0415

    lock, history = lock_and_history
    name, task = f"fork-{uuid.uuid4().hex}", "pkg.jobs:fork"
    instant = datetime(2030, 1, 1, tzinfo=UTC)
    holding = lock.acquire(name, 30, fenced=True)
    assert holding is not None
    assert history.start(task, instant, lock=name, node="parent", token=holding.fence, at=instant)
    lock_engine = lock._bind
    assert isinstance(lock_engine, Engine)
    parent_sessions = (_session_id(history.engine), _session_id(lock_engine))

    def child() -> dict[str, Any]:
        sessions = [_session_id(history.engine), _session_id(lock_engine)]
        held = lock.is_held(name)
        lock.release(name)  # must not free the parent's lease
        took = lock.try_acquire(name, 30)
        later = instant.replace(minute=1)
        started = history.start(task, later, lock=name, node="child", token=None, at=later)
        return {"sessions": sessions, "held": held, "took": took, "started": started}

    seen = in_forked_child(child)

    assert "error" not in seen, seen["error"]
    assert (seen["held"], seen["took"], seen["started"]) == (False, False, 1)
    assert not set(seen["sessions"]) & set(parent_sessions), "the child used a parent's session"
    witness = DatabaseLeaseLock(server_url, table=lock._tables.locks.name)
    try:
        assert not witness.try_acquire(name, 30), "the child freed the parent's lease"
    finally:
        witness.close()
    # The parent's own sessions survived the child's exit, and still work.
    assert (_session_id(history.engine), _session_id(lock_engine)) == parent_sessions
    assert lock.renew_holding(holding, 30)
    assert {(r.node, r.state) for r in history.runs(task)} == {
        ("parent", RunState.RUNNING),
        ("child", RunState.RUNNING),
    }


def test_a_child_forked_while_a_group_of_finishes_is_on_the_wire_finishes_its_own(
    server_url: str, lock_and_history: tuple[DatabaseLeaseLock, SqlRunHistory]
) -> None:
    """A parent thread held the run history's group sender (`GroupedCalls`) at the
    fork: the child gets its own, and its finish is written (read from the parent)."""
    from datetime import UTC, datetime  # noqa: PLC0415

    _, history = lock_and_history
    grouped = history._finishes
    assert grouped is not None
    task, instant = "pkg.jobs:fork-finish", datetime(2030, 1, 1, tzinfo=UTC)
    assert history.start(task, instant, lock="fork", node="child", token=7, at=instant) == 1

    def child() -> dict[str, Any]:
        finished = history.finish(
            task, instant, lock="fork", state=RunState.SUCCEEDED, at=instant, token=7, error=None
        )
        return {"finished": finished}

    with grouped._sender:  # a group of the parent's on the wire, as the fork happens
        seen = in_forked_child(child)
    assert seen == {"finished": True}
    assert [(r.node, r.state) for r in history.runs(task)] == [("child", RunState.SUCCEEDED)]
