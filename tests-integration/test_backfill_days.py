"""A backfill of days of a one-minute task, each instant run once, oldest first.

The suite backfills one day (1,440 instants); `FIREFLY_BACKFILL_DAYS=7` backfills a
week, 10,080 instants (a few minutes: the rate cap alone makes it 100 s).

One node drives it (`hosts.runtime.steering.run_backfills`), with its lock and claims
on Redis and its run history on PostgreSQL, as a resident host's backfill thread
does. The body appends the fire's instant to a witness file (O_APPEND); a second
client reads the history. Checked: every instant of the window once in the witness,
in order, each recorded succeeded with trigger `backfill`, the request gone; asking
again runs nothing. The time it took is printed (`-s`), and bounded loosely: the
rate cap alone makes it at least 10,080 / `BACKFILL_RATE` seconds.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.control import ControlStore
from firefly_scheduling.control.triggers import backfill
from firefly_scheduling.fires.outcome import Verdict
from firefly_scheduling.history.port import SUCCESS_STATES
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.runtime.steering import BACKFILL_RATE, run_backfills
from firefly_scheduling.hosts.runtime.steering_store import steering_store
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))

pytestmark = pytest.mark.slow

START = datetime(2026, 2, 1, tzinfo=UTC)
DAYS = int(os.environ.get("FIREFLY_BACKFILL_DAYS", "1"))
END = START + timedelta(days=DAYS)
INSTANTS = DAYS * 24 * 60


@pytest.fixture
def node(
    redis_url: str, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ScheduledDescriptor, TaskRuntime, ControlStore, Settings, Path]]:
    witness = tmp_path / "witness.log"
    monkeypatch.setenv("FIREFLY_HOSTAPP_LOG", str(witness))
    descriptor = ScheduledDescriptor(
        target="firefly_hostapps.steered:every_five",
        fixed_rate=60.0,
        lock_name=f"backfill-week-{uuid.uuid4().hex[:12]}",
        lock_ttl=30.0,
    )
    settings = Settings(
        lock_provider="redis",
        lock_urls={"redis": redis_url},
        history_url=postgres_url,
        node="backfiller",
    )
    runtime = build_runtime([descriptor], settings, host="run", node="backfiller")
    store = steering_store(settings)
    assert store is not None
    try:
        yield descriptor, runtime, store, settings, witness
    finally:
        for request in store.backfills(descriptor.target):
            store.cancel_backfill(request.task, request.start, request.end)
        store.close()
        runtime.close()


def test_days_of_a_one_minute_task_are_backfilled_once_oldest_first(
    node: tuple[ScheduledDescriptor, TaskRuntime, ControlStore, Settings, Path],
    postgres_url: str,
) -> None:
    descriptor, runtime, store, settings, witness = node
    assert descriptor.lock_name is not None
    backfill(store, descriptor.target, START, END, by="operator@test", settings=settings)
    began = time.monotonic()
    [progress] = run_backfills([descriptor], runtime, store)
    took = time.monotonic() - began
    print(f"\nbackfill of {INSTANTS} instants: {took:.1f} s, {INSTANTS / took:.0f} fires/s")
    assert progress.pending == INSTANTS
    assert progress.done
    assert {result.verdict for result in progress.results} == {Verdict.SUCCEEDED}
    instants = [START + timedelta(minutes=n) for n in range(INSTANTS)]
    written = [line.split()[2] for line in witness.read_text().splitlines()]
    assert written == [instant.isoformat() for instant in instants]
    history = SqlRunHistory(postgres_url)
    try:
        records = history.records_between(
            descriptor.target,
            lock=descriptor.lock_name,
            after=START - timedelta(microseconds=1),
            until=END,
            states=SUCCESS_STATES,
        )
    finally:
        history.close()
    assert [record.instant for record in records] == instants
    assert {record.trigger for record in records} == {"backfill"}
    assert store.backfills(descriptor.target) == []
    assert took >= INSTANTS / BACKFILL_RATE * 0.99

    backfill(store, descriptor.target, START, END, by="operator@test", settings=settings)
    [again] = run_backfills([descriptor], runtime, store)
    assert (again.pending, again.results, again.done) == (0, [], True)
    assert len(witness.read_text().splitlines()) == INSTANTS
