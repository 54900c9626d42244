"""A node SIGKILLed inside `current_fire().atomic(...)` leaves nothing, and is adopted.

Node A, a process of its own (`atomic_killed_node.py`), runs a fire whose body writes
its application row inside the block, then waits; the test kills it (SIGKILL) before
its transaction commits. A second connection then finds neither the row nor a
success: the server rolled the transaction back, and the record is still `running`,
attempt 1. Node B (this process, its own lock and history clients) runs the task's
next fires until its task lock is free (A's lease lapses) and it adopts A's fire:
that run is attempt 2, sees the same `idempotency_key`, and its block commits the
row and the success together.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire, FireResult
from firefly_scheduling.fires.runner import FireRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atomic_clients import Place, database_url, place_on
from python_runs import orders_env, start_python

NODE_SCRIPT = Path(__file__).resolve().parent / "atomic_killed_node.py"
LOCK_TTL = 2.0


@pytest.fixture(params=["postgres", "mariadb", "sqlite"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    url = database_url(request.param, request, tmp_path)
    with place_on(url, tmp_path) as fresh:
        yield fresh


def wait_for(marker: Path, node: subprocess.Popen[bytes], seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if marker.exists() and marker.read_text():
            return dict(json.loads(marker.read_text()))
        assert node.poll() is None, "node A ended before its block"
        time.sleep(0.02)
    raise AssertionError(f"node A did not reach its block within {seconds} s")


def test_a_node_killed_inside_the_block_leaves_nothing_and_its_fire_is_adopted(
    place: Place, tmp_path: Path
) -> None:
    descriptor = place.descriptor(lock_ttl=LOCK_TTL)
    target = descriptor.target
    instant = datetime.now(UTC).replace(microsecond=0)
    marker = tmp_path / "inside"
    orders = {
        "url": place.url,
        "lock_url": place.lock_url,
        "lock_table": place.lock_table,
        "history_table": place.history.table.name,
        "app_table": place.app.name,
        "target": target,
        "instant": instant.isoformat(),
        "lock_ttl": LOCK_TTL,
        "marker": str(marker),
    }
    node_a = start_python(NODE_SCRIPT, env=orders_env("FIREFLY_ATOMIC_NODE", orders))
    try:
        inside = wait_for(marker, node_a, 60)
    finally:
        node_a.send_signal(signal.SIGKILL)
        node_a.wait(30)
    assert node_a.returncode == -signal.SIGKILL
    assert inside["attempt"] == 1

    # Nothing of it remains: the server rolled the open transaction back.
    assert place.app_rows() == []
    record = place.record(target, instant)
    assert (record["state"], record["attempt"], record["node"]) == ("running", 1, "A")

    seen: list[tuple[str, int]] = []

    def body() -> None:
        running = current_fire()
        assert running is not None
        with Session(place.engine) as session, session.begin(), running.atomic(session):
            session.execute(
                sa.insert(place.app).values(fire=running.idempotency_key, attempt=running.attempt)
            )
        seen.append((running.idempotency_key, running.attempt))

    lock = place.lock()
    runner = FireRunner(lock, history=place.history, node="B")
    adopted: list[FireResult] = []
    fire = instant
    deadline = time.monotonic() + 30
    try:
        while not adopted and time.monotonic() < deadline:
            fire += timedelta(seconds=1)
            result = runner.run(Fire.at(descriptor, fire), body)
            adopted.extend(result.adopted)
            if not adopted:
                time.sleep(0.25)  # A's lease has not lapsed yet: the fire was skipped
    finally:
        runner.close()
        lock.close()
    [again] = adopted
    assert again.fire.instant == instant
    assert again.attempt == 2
    assert (inside["key"], 2) in seen  # the same key on the adopting attempt
    assert {"fire": inside["key"], "attempt": 2} in place.app_rows()
    record = place.record(target, instant)
    assert (record["state"], record["attempt"], record["node"]) == ("succeeded", 2, "B")
