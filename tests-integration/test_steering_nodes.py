"""Manual triggers and backfills on two real `firefly-scheduling run` nodes.

Per backend (Redis; PostgreSQL's session locks), two resident nodes host the app
`firefly_hostapps.steered`, with the run history on PostgreSQL. An operator's client,
a process of its own, writes a trigger or a backfill to the control store
(`control.triggers`); the evidence comes from outside the nodes: the bodies append
to a witness file (O_APPEND, stamped with the kernel's CLOCK_MONOTONIC), and the
operator's clients read the history and the control store.

* A trigger runs the task exactly once across the fleet, within 2 s of being asked
  (the witness's stamp against the operator's, on one kernel clock), recorded with
  trigger `manual` and named by the trigger's time; none stays pending.
* A backfill of a past hour of an every-five-minutes task runs each instant without
  a successful run once, oldest first (an instant that succeeded before is not run,
  one recorded skipped is, one recorded failed runs as its next attempt), recorded
  with trigger `backfill`; asking for it again
  runs nothing, and the request is gone once done.
"""

from __future__ import annotations

import signal
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from firefly_scheduling.control import ControlStore
from firefly_scheduling.control.selection import resolve_control_store
from firefly_scheduling.control.triggers import backfill, trigger
from firefly_scheduling.history import RunState
from firefly_scheduling.settings import Settings
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import STARTED, Node, node_env, start_node

from backend_matrix import lock_env, lock_settings, server_urls

REPORT = "firefly_hostapps.steered:report"
EVERY_FIVE = "firefly_hostapps.steered:every_five"
REPLAYED = "firefly_hostapps.steered:replayed"
#: The past hour a backfill replays: twelve instants of a `*/5` cron.
WINDOW = (datetime(2026, 3, 1, 0, 0, tzinfo=UTC), datetime(2026, 3, 1, 1, 0, tzinfo=UTC))
FIVE_MINUTES = timedelta(minutes=5)
#: How long the test waits for what it expects before it fails (a loaded machine).
PATIENCE = 60.0


@dataclass(frozen=True)
class Ran:
    """One line of the witness: a run, where, of which instant, when (kernel clocks)."""

    task: str
    node: str
    instant: str
    monotonic_ns: int
    realtime_ns: int


@dataclass
class Fleet:
    nodes: list[Node]
    witness: Path
    lock: str
    store: ControlStore
    history: SqlRunHistory
    settings: Settings
    #: Nodes a test killed with SIGKILL (their exit status is not 0).
    killed: set[str] = field(default_factory=set)

    def ran(self, task: str) -> list[Ran]:
        if not self.witness.exists():
            return []
        lines = [line.split() for line in self.witness.read_text().splitlines()]
        found = [Ran(t, n, i, int(m), int(r)) for t, n, i, m, r in lines]
        return [each for each in found if each.task == task]

    def wait_for(self, task: str, count: int) -> list[Ran]:
        give_up = time.monotonic() + PATIENCE
        while len(self.ran(task)) < count:
            assert time.monotonic() < give_up, f"{self.ran(task)}\n{self.outputs()}"
            time.sleep(0.02)
        return self.ran(task)

    def outputs(self) -> str:
        return "\n".join(f"--- {node.name}\n{node.text()[-3000:]}" for node in self.nodes)


@pytest.fixture(params=["redis", "postgres"])
def fleet(request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str) -> Iterator[Fleet]:
    backend = str(request.param)
    urls = server_urls(request, [backend])
    urls.setdefault("postgres", postgres_url)
    lock = f"steered-{uuid.uuid4().hex[:12]}"
    witness = tmp_path / "witness.log"
    settings = lock_settings(backend, urls, tmp_path, "operator", history_url=postgres_url)
    store = resolve_control_store(settings)
    _forget_earlier_requests(store)
    env = node_env(
        tmp_path,
        FIREFLY_HOSTAPP_LOG=str(witness),
        FIREFLY_HOSTAPP_LOCK=lock,
        FIREFLY_SCHEDULING_HISTORY_URL=postgres_url,
        # A claim lives grace + clock skew: 15 s, so that the claims of a node killed
        # mid-backfill lapse within the test.
        FIREFLY_SCHEDULING_FIRES_GRACE="10",
        **lock_env(backend, urls, tmp_path),
    )
    nodes = [
        start_node(
            "run", f"{backend}-{n}", app="firefly_hostapps.steered", env=env, workdir=tmp_path
        )
        for n in (1, 2)
    ]
    history = SqlRunHistory(postgres_url)
    fleet: Fleet | None = None
    try:
        for node in nodes:
            assert node.wait_for_output(STARTED, timeout=60), node.text()
        fleet = Fleet(nodes, witness, lock, store, history, settings)
        yield fleet
    finally:
        killed = fleet.killed if fleet is not None else set()
        codes = {node.name: node.stop() for node in nodes}
        _forget_earlier_requests(store)
        store.close()
        history.close()
        outputs = "\n".join(node.text()[-3000:] for node in nodes)
        assert all(code == 0 for name, code in codes.items() if name not in killed), outputs
        assert "needs a durable control store" not in outputs
        assert "Traceback" not in outputs, outputs


def _forget_earlier_requests(store: ControlStore) -> None:
    """Drop what an earlier, interrupted run of this module may have left pending."""
    while store.take_trigger(REPORT) is not None:
        pass
    for task in (EVERY_FIVE, REPLAYED):
        for request in store.backfills(task):
            store.cancel_backfill(request.task, request.start, request.end)


def test_a_trigger_runs_once_across_the_fleet_within_two_seconds(fleet: Fleet) -> None:
    asked_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    asked = trigger(fleet.store, REPORT, by="operator@test")
    [ran] = fleet.wait_for("report", 1)
    assert (ran.monotonic_ns - asked_ns) / 1e9 < 2.0, fleet.outputs()
    time.sleep(3.0)  # six polls of each node: none runs it again
    assert fleet.ran("report") == [ran]
    assert fleet.store.triggers(REPORT) == []
    instant = datetime.fromtimestamp(asked.requested_at, UTC)
    assert ran.instant == instant.isoformat()
    [record] = fleet.history.runs(REPORT, lock=f"{fleet.lock}-report")
    assert (record.instant, record.state, record.trigger, record.requested_by) == (
        instant,
        RunState.SUCCEEDED,
        "manual",
        "operator@test",
    )
    assert record.node == ran.node


def test_a_backfill_runs_each_missing_instant_once_oldest_first(fleet: Fleet) -> None:
    lock = f"{fleet.lock}-every-five"
    start, end = WINDOW
    instants = [start + n * FIVE_MINUTES for n in range(12)]
    done_before, skipped_before = instants[2], instants[4]
    fleet.history.record_run(
        EVERY_FIVE,
        done_before,
        lock=lock,
        node="earlier",
        token=None,
        state=RunState.SUCCEEDED,
        error=None,
        started_at=done_before,
        ended_at=done_before,
    )
    fleet.history.skip(
        EVERY_FIVE, skipped_before, lock=lock, node="earlier", reason="paused", at=skipped_before
    )
    failed_before = instants[6]
    fleet.history.start(
        EVERY_FIVE, failed_before, lock=lock, node="earlier", token=None, at=failed_before
    )
    fleet.history.finish(
        EVERY_FIVE,
        failed_before,
        lock=lock,
        token=None,
        state=RunState.FAILED,
        error="boom",
        at=failed_before,
    )
    backfill(fleet.store, EVERY_FIVE, start, end, by="operator@test", settings=fleet.settings)
    expected = [instant for instant in instants if instant != done_before]
    fleet.wait_for("every_five", len(expected))
    # The task's own fires, outside the window, count in the witness too: wait for the
    # window's runs themselves.
    give_up = time.monotonic() + PATIENCE
    while True:
        ran = fleet.ran("every_five")
        in_window = [e for e in ran if start.isoformat() <= e.instant < end.isoformat()]
        if len(in_window) >= len(expected) or time.monotonic() > give_up:
            break
        time.sleep(0.05)
    assert [each.instant for each in in_window] == [i.isoformat() for i in expected]
    stamps = [each.monotonic_ns for each in in_window]
    assert stamps == sorted(stamps)
    _wait_until_forgotten(fleet)
    records = {r.instant: r for r in fleet.history.runs(EVERY_FIVE, limit=100, lock=lock)}
    assert {i: records[i].state for i in instants} == dict.fromkeys(instants, RunState.SUCCEEDED)
    assert records[done_before].trigger == "scheduled"
    assert {records[i].trigger for i in expected if i != failed_before} == {"backfill"}
    assert {records[i].requested_by for i in expected if i != failed_before} == {"operator@test"}
    # The failed instant ran as the attempt after the failed one, on its record.
    assert (records[failed_before].attempt, records[failed_before].trigger) == (2, "scheduled")

    # The same window again: every instant succeeded, nothing runs twice.
    backfill(fleet.store, EVERY_FIVE, start, end, by="operator@test", settings=fleet.settings)
    _wait_until_forgotten(fleet)
    time.sleep(1.5)
    assert len(fleet.ran("every_five")) == len(ran), fleet.outputs()


def _wait_until_forgotten(fleet: Fleet, task: str = EVERY_FIVE) -> None:
    give_up = time.monotonic() + PATIENCE
    while fleet.store.backfills(task):
        assert time.monotonic() < give_up, fleet.outputs()
        time.sleep(0.05)


def test_a_backfill_goes_on_on_another_node_when_its_node_dies(fleet: Fleet) -> None:
    """The node driving a backfill is killed (SIGKILL) half-way: the other node takes
    the request over once the lease lapses (the task's 3 s lock TTL) and runs the rest,
    oldest first; no instant starts twice."""
    start = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
    end = start + timedelta(minutes=30)
    instants = [(start + timedelta(minutes=n)).isoformat() for n in range(30)]
    backfill(fleet.store, REPLAYED, start, end, by="operator@test", settings=fleet.settings)

    def in_window() -> list[Ran]:
        return [each for each in fleet.ran("replayed") if each.instant in instants]

    give_up = time.monotonic() + PATIENCE
    while len(in_window()) < 5:
        assert time.monotonic() < give_up, fleet.outputs()
        time.sleep(0.02)
    driver = in_window()[0].node
    [dying] = [node for node in fleet.nodes if node.name == driver]
    dying.process.send_signal(signal.SIGKILL)
    dying.process.wait()
    fleet.killed.add(driver)
    _wait_until_forgotten(fleet, REPLAYED)

    ran = in_window()
    started = [each.instant for each in ran]
    assert len(started) == len(set(started)), f"an instant started twice: {started}"
    theirs = [each.instant for each in ran if each.node == driver]
    ours = [each.instant for each in ran if each.node != driver]
    assert theirs == sorted(theirs)
    assert ours, fleet.outputs()
    if ours != sorted(ours):
        # The instant the dead node had claimed without starting it was its own until
        # the claim lapsed: the survivor runs it last. Nothing else is out of order.
        assert ours[:-1] == sorted(ours[:-1])
        assert ours[-1] == instants[instants.index(theirs[-1]) + 1]
    lock = f"{fleet.lock}-replayed"
    found = fleet.history.records_between(
        REPLAYED, lock=lock, after=start - timedelta(seconds=1), until=end, states=set(RunState)
    )
    records = {r.instant.isoformat(): r for r in found}
    assert set(instants) <= set(records), (sorted(set(instants) - set(records)), started)
    unsucceeded = [i for i in instants if records[i].state is not RunState.SUCCEEDED]
    # At most the one instant whose body ran when its node died (closed as expired by
    # the next run of the task): started once, never twice.
    assert len(unsucceeded) <= 1, [(i, records[i].state) for i in unsucceeded]
    assert set(instants) - set(started) <= set(unsucceeded)
