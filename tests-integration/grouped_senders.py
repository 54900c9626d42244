"""Calls made to queue behind one another, and statements SQLite reports, for the group tests.

A group forms (`GroupedCalls`) when calls arrive while another group is on the wire.
`send_as_one_group` holds the sender's mutex as a group on the wire would, starts
each call in a thread of its own, waits until every one has queued, then lets them
go: they are sent as one group. `sqlite_statements` records every statement sqlite3
itself reports running (its trace callback) on the connections pools open, which the
code under test cannot fake. `one_lapsed_among_held` sets up the group the release
tests send: held names, and one whose lease lapsed and another node took.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import Pool

from firefly_scheduling.concurrency.grouped import GroupedCalls
from firefly_scheduling.history import HistoryError
from firefly_scheduling.history.port import RunState
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.sql_history.store import SqlRunHistory


def send_as_one_group(
    grouped: GroupedCalls[Any, Any],
    calls: Sequence[Callable[[], object]],
    *,
    before_sending: Callable[[], object] | None = None,
) -> None:
    """Run `calls` from threads, queued behind the sender, then as one group.

    `before_sending` runs once all are queued, before the sender is let go.
    """
    threads = [threading.Thread(target=call) for call in calls]
    with grouped._sender:  # a group on the wire: every call queues behind it
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while len(grouped._queue) < len(calls):
            queued = len(grouped._queue)
            assert time.monotonic() < deadline, f"{queued} of {len(calls)} calls queued"
            time.sleep(0.005)
        if before_sending is not None:
            before_sending()
    for thread in threads:
        thread.join(timeout=30)


def finishes_as_one_group(
    store: SqlRunHistory,
    finishes: Sequence[tuple[str, int]],
    *,
    at: datetime,
    before_sending: Callable[[], object] | None = None,
) -> dict[str, bool | BaseException]:
    """Finish the run of each `(task, token)` (lock "lk", fire `at`), as one group;
    each task's answer, or the `HistoryError` it got."""
    grouped = store._finishes
    assert grouped is not None
    answers: dict[str, bool | BaseException] = {}

    def finish(task: str, token: int) -> None:
        try:
            answers[task] = store.finish(
                task, at, lock="lk", state=RunState.SUCCEEDED, at=at, token=token, error=None
            )
        except HistoryError as err:
            answers[task] = err

    calls = [partial(finish, task, token) for task, token in finishes]
    send_as_one_group(grouped, calls, before_sending=before_sending)
    return answers


@contextmanager
def sqlite_statements() -> Iterator[list[str]]:
    """Every statement sqlite3 runs on a connection any pool opens inside the block."""
    seen: list[str] = []
    mutex = threading.Lock()

    def record(sql: str) -> None:
        with mutex:
            seen.append(sql)

    def trace(dbapi_connection: Any, _record: Any) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.set_trace_callback(record)

    event.listen(Pool, "connect", trace)
    try:
        yield seen
    finally:
        event.remove(Pool, "connect", trace)


def fresh_names(tag: str, count: int) -> list[str]:
    """`count` lock names no earlier run on the same server used."""
    stamp = time.time_ns()
    return [f"{tag}-{stamp}-{index:05d}" for index in range(count)]


def held(holdings: Sequence[Holding | Any]) -> list[Holding]:
    """`holdings`, every one of them won."""
    assert all(isinstance(holding, Holding) for holding in holdings), holdings
    return list(holdings)


def one_lapsed_among_held(
    lock: DatabaseLeaseLock, other: DatabaseLeaseLock, names: list[str]
) -> tuple[Holding, Holding, list[Holding]]:
    """`(lapsed, taken, holdings)`: `lock` holds `names[1:]`; its lease of `names[0]`
    lapsed and `other` took it (`taken`), so a release of `lapsed` must be refused and
    must not delete `other`'s lease."""
    holdings = held(lock.acquire_many([(name, 30) for name in names[1:]]))
    lapsed = lock.acquire(names[0], 0.5)
    assert isinstance(lapsed, Holding)
    time.sleep(0.8)
    taken = other.acquire(names[0], 30)
    assert isinstance(taken, Holding)
    return lapsed, taken, holdings
