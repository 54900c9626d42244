"""A `buffer_one` fire whose waiting slot lapsed before it could act on it does not wait.

Found by the fault checker (memcached, MariaDB): a fire took its task's one waiting
slot while another fire waited in it, by the stamps the nodes wrote. A node that is
stopped (`SIGSTOP`) or whose reply is held back between the server's grant of the
slot and its own use of it acts on a lease that may have ended on the server
meanwhile; another fire may have taken the slot since, and a lapsed lease is never
renewed. The fire went on waiting all the same, marked `buffered`, until its slot's
first renewal failed: two fires waited at once, and had the task lock come free
meanwhile, the second would have run. It now gives the slot back and is skipped,
recorded with why, as a fire whose task lock lapsed before its body is.

Two nodes share a Redis server (each its own client) and a run history on
PostgreSQL, read back by a client of its own. Node `b`'s lock is the real one, but
for the grant of a waiting slot, after which it stalls past the slot's TTL, as a
node stopped at that point would.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.overlap_names import SLOT_PREFIX
from firefly_scheduling.fires.overlap_wait import SLOT_LAPSED
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunState
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_redis import RedisLock
from unique_tasks import unique_task

T0 = datetime(2030, 1, 1, tzinfo=UTC)
LOCK_TTL = 1.0
#: How long the test waits for the other node before giving up (a loaded machine).
PATIENCE = 30.0


class StalledAfterSlotGrant:
    """A real lock whose node stalls past the TTL right after a waiting slot's grant."""

    def __init__(self, inner: RedisLock) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def acquire(
        self, name: str, ttl_seconds: float, *, wait: float = 0.0, fenced: bool = False
    ) -> Holding | None:
        holding = self._inner.acquire(name, ttl_seconds, wait=wait, fenced=fenced)
        if holding is not None and name.startswith(SLOT_PREFIX):
            time.sleep(ttl_seconds + 0.2)
        return holding

    def release_holding(self, holding: Holding) -> None:
        self._inner.release_holding(holding)

    def renew_holding(self, holding: Holding, ttl_seconds: float) -> bool:
        return self._inner.renew_holding(holding, ttl_seconds)


def _runner(lock: Any, postgres_url: str, history: SqlRunHistory, node: str) -> FireRunner:
    return FireRunner(
        lock,
        history=SqlRunHistory(postgres_url, table=history.table.name),
        clock=lambda: T0,
        node=node,
        keepalive_interval=0.2,
    )


def test_a_fire_whose_slot_lapsed_before_it_acted_on_it_is_skipped_not_buffered(
    redis_url: str, postgres_url: str, history: SqlRunHistory
) -> None:
    task = unique_task("slot_lapsed", lock_ttl=LOCK_TTL, fixed_rate=60.0, overlap="buffer_one")
    a = _runner(RedisLock(redis_url), postgres_url, history, "a")
    b = _runner(StalledAfterSlotGrant(RedisLock(redis_url)), postgres_url, history, "b")
    started, release = threading.Event(), threading.Event()

    def first() -> None:
        started.set()
        release.wait(PATIENCE)

    ran: list[int] = []
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(a.run, Fire.at(task, T0), first)
            assert started.wait(PATIENCE)
            try:
                second = b.run(Fire.at(task, T0 + timedelta(minutes=1)), lambda: ran.append(1))
            finally:
                release.set()
            assert running.result(timeout=PATIENCE).verdict is Verdict.SUCCEEDED
    finally:
        a.close()
        b.close()
    assert (second.verdict, second.buffered_seconds) == (Verdict.OVERLAPPING, None), second
    assert ran == []
    records = {record.instant: record for record in history.runs(task.target, lock=task.target)}
    skipped = records[T0 + timedelta(minutes=1)]
    assert (skipped.state, skipped.node, skipped.error) == (RunState.SKIPPED, "b", SLOT_LAPSED)
