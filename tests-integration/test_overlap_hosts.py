"""`overlap=` on two real `firefly-scheduling run` processes sharing Redis and PostgreSQL.

The task fires every second and its body takes 2.5 s, so every fire comes while an
earlier run still runs, on this node or the other. Each run appends `node instant
start end` to a shared log (`O_APPEND`), and a third client reads the run history
from PostgreSQL afterwards:

* `allow_all`: runs overlap (within one process too: the host lets several calls of
  the task go), and no fire runs
  twice: each instant is in the log at most once, and each run the log shows is
  recorded `succeeded` in the history by the node that ran it;
* `buffer_one`: no two runs ever overlap, anywhere in the fleet; fires ran after
  waiting (started a period or more after their instant), and the fires that came
  while one waited are recorded skipped, with why;
* `buffer_all` (a 1.5 s body): no two runs overlap, the runs start in the order of
  their instants, and no fire between the first and the last run is skipped: every
  one waited its turn (the queue stays below its bound of 10);
* `cancel_other`: no two runs overlap; runs stopped early when a newer fire asked
  them to (each body watches `current_fire().cancel_requested`), on either node,
  and the history records exactly those runs `cancelled`.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from firefly_scheduling.fires.policy import ANOTHER_FIRE_WAITS
from firefly_scheduling.history import RunState
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import STARTED, Run, node_env, overlaps, start_node

pytestmark = pytest.mark.slow

TARGET = "firefly_hostapps.overlapping:overlapping"
#: Seconds of firing once both nodes have started: a dozen fires of a 2.5 s body.
RUN_SECONDS = 12.0


@dataclass(frozen=True)
class Fleet:
    """What the two nodes did: the bodies' log, the history, the nodes' output."""

    runs: list[tuple[datetime, Run]]
    #: The instants of the runs that stopped early, asked to by a newer fire.
    asked: set[datetime]
    lock: str
    outputs: str


def _read(log: Path) -> tuple[list[tuple[datetime, Run]], set[datetime]]:
    found, asked = [], set()
    for line in log.read_text().splitlines() if log.exists() else []:
        node, instant, start, end, stopped = line.split()
        at = datetime.fromtimestamp(float(instant), UTC)
        found.append((at, Run(node, float(start), float(end))))
        if stopped == "1":
            asked.add(at)
    return sorted(found, key=lambda each: each[1].start), asked


def _fleet(
    overlap: str, redis_url: str, postgres_url: str, workdir: Path, body: float = 2.5
) -> Fleet:
    log = workdir / "runs.log"
    lock = f"hostapps-overlap-{uuid.uuid4().hex}"
    env = node_env(
        workdir,
        FIREFLY_HOSTAPP_LOG=str(log),
        FIREFLY_HOSTAPP_LOCK=lock,
        FIREFLY_HOSTAPP_OVERLAP=overlap,
        FIREFLY_HOSTAPP_BODY=str(body),
        FIREFLY_SCHEDULING_HISTORY_URL=postgres_url,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="redis",
        FIREFLY_SCHEDULING_LOCK_REDIS_URL=redis_url,
    )
    nodes = [
        start_node(
            "run", f"{overlap}-{n}", app="firefly_hostapps.overlapping", env=env, workdir=workdir
        )
        for n in (1, 2)
    ]
    for node in nodes:
        node.wait_for_output(STARTED, timeout=60)
    time.sleep(RUN_SECONDS)
    for node in nodes:
        node.terminate()
    codes = [node.stop() for node in nodes]
    outputs = "\n".join(f"--- {node.name}\n{node.text()[-3000:]}" for node in nodes)
    assert codes == [0, 0], outputs
    runs, asked = _read(log)
    return Fleet(runs, asked, lock, outputs)


@pytest.fixture
def history(postgres_url: str) -> Iterator[SqlRunHistory]:
    history = SqlRunHistory(postgres_url)
    try:
        yield history
    finally:
        history.close()


def _records(history: SqlRunHistory, lock: str) -> dict[datetime, tuple[RunState, str, str | None]]:
    return {
        record.instant: (record.state, record.node, record.error)
        for record in history.runs(TARGET, limit=1000, lock=lock)
    }


def test_allow_all_overlaps_runs_across_the_fleet_and_runs_each_fire_once(
    redis_url: str, postgres_url: str, history: SqlRunHistory, tmp_path: Path
) -> None:
    fleet = _fleet("allow_all", redis_url, postgres_url, tmp_path)
    instants = [instant for instant, _ in fleet.runs]
    assert len(instants) >= 6, fleet.outputs
    assert len(set(instants)) == len(instants), "a fire ran twice"
    runs = [run for _, run in fleet.runs]
    assert overlaps(runs), "no two runs overlapped"
    assert {run.node for run in runs} == {"allow_all-1", "allow_all-2"}
    in_one_node = [pair for pair in overlaps(runs) if pair[0].node == pair[1].node]
    assert in_one_node, "no node ran two fires at once"
    records = _records(history, fleet.lock)
    for instant, run in fleet.runs:
        assert records[instant][:2] == (RunState.SUCCEEDED, run.node)


def test_buffer_one_never_overlaps_runs_fires_that_waited_and_records_the_rest_skipped(
    redis_url: str, postgres_url: str, history: SqlRunHistory, tmp_path: Path
) -> None:
    fleet = _fleet("buffer_one", redis_url, postgres_url, tmp_path)
    runs = [run for _, run in fleet.runs]
    assert len(runs) >= 3, fleet.outputs
    assert overlaps(runs) == [], "two runs overlapped"
    waited = [run for instant, run in fleet.runs if run.start - instant.timestamp() >= 1.0]
    assert waited, "no run waited for the one before it"
    records = _records(history, fleet.lock)
    skipped = [error for state, _, error in records.values() if state is RunState.SKIPPED]
    assert ANOTHER_FIRE_WAITS in skipped
    for instant, run in fleet.runs:
        assert records[instant][:2] == (RunState.SUCCEEDED, run.node)


def test_buffer_all_runs_every_fire_in_order_never_overlapping(
    redis_url: str, postgres_url: str, history: SqlRunHistory, tmp_path: Path
) -> None:
    fleet = _fleet("buffer_all", redis_url, postgres_url, tmp_path, body=1.5)
    runs = [run for _, run in fleet.runs]
    assert len(runs) >= 4, fleet.outputs
    assert overlaps(runs) == [], "two runs overlapped"
    instants = [instant for instant, _ in fleet.runs]  # in order of start
    assert instants == sorted(instants), "a fire ran before an older one"
    assert len(set(instants)) == len(instants), "a fire ran twice"
    waited = [run for instant, run in fleet.runs if run.start - instant.timestamp() >= 1.0]
    assert waited, "no run waited for the one before it"
    records = _records(history, fleet.lock)
    between = {
        at: state for at, (state, _, _) in records.items() if instants[0] <= at <= instants[-1]
    }
    assert set(between.values()) == {RunState.SUCCEEDED}, between
    assert sorted(between) == instants  # every fire in the span ran, each once


def test_cancel_other_stops_the_running_fire_for_the_newer_one_across_the_fleet(
    redis_url: str, postgres_url: str, history: SqlRunHistory, tmp_path: Path
) -> None:
    fleet = _fleet("cancel_other", redis_url, postgres_url, tmp_path)
    runs = [run for _, run in fleet.runs]
    assert len(runs) >= 4, fleet.outputs
    assert overlaps(runs) == [], "two runs overlapped"
    assert fleet.asked, "no run was asked to stop"
    records = _records(history, fleet.lock)
    cancelled = {at for at, (state, _, _) in records.items() if state is RunState.CANCELLED}
    assert cancelled == fleet.asked
    for instant, run in fleet.runs:
        state, node, _ = records[instant]
        assert node == run.node
        assert state is (RunState.CANCELLED if instant in fleet.asked else RunState.SUCCEEDED)
