"""The hosts as real processes: tick from several nodes, interval spacing, boot refusals."""

from __future__ import annotations

import itertools
import json
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import STARTED, node_env, overlaps, read_runs, start_node

pytestmark = pytest.mark.slow

NODES = 3


def _wait_for_early_minute() -> None:
    """Sleep (at most ~15 s) until the minute has 15 s left, so all ticks share it.

    Three processes start within a second or two of each other, and the body (5 s)
    outlasts that spread, so every process tries the fire while the winner holds it.
    """
    second = datetime.now(UTC).second
    if second > 45:
        time.sleep(60 - second + 0.2)


def test_tick_from_three_processes_runs_the_locked_task_once(
    tmp_path: Path, redis_url: str
) -> None:
    log, fires = tmp_path / "runs.log", tmp_path / "fires.jsonl"
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="redis",
        FIREFLY_SCHEDULING_LOCK_REDIS_URL=redis_url,
        FIREFLY_HOSTAPP_LOCK=f"hostapps-tick-once-{uuid.uuid4().hex}",
        FIREFLY_HOSTAPP_LOG=str(log),
        FIREFLY_HOSTAPP_BODY="5",
    )
    _wait_for_early_minute()
    nodes = [
        start_node(
            "tick",
            f"tick-{n}",
            app="firefly_hostapps.tick_once",
            env=env,
            workdir=tmp_path,
            args=("--fire-log", str(fires)),
        )
        for n in range(1, NODES + 1)
    ]
    codes = [node.wait(timeout=60) for node in nodes]
    outputs = "\n".join(node.text() for node in nodes)
    assert codes == [0] * NODES, outputs
    assert len(read_runs(log)) == 1, outputs
    records = [json.loads(line) for line in fires.read_text().splitlines()]
    assert len(records) == NODES
    assert len({record["instant"] for record in records}) == 1  # the same fire everywhere
    assert sorted(record["ran"] for record in records) == [False, False, True]
    # The verdicts: the two other nodes lost the fire's claim.
    assert sorted(record["status"] for record in records) == [
        "claimed_elsewhere",
        "claimed_elsewhere",
        "succeeded",
    ]
    summaries = [node.text() for node in nodes]
    assert sum("UTC: 1 succeeded" in text for text in summaries) == 1, outputs
    assert sum("UTC: 1 claimed elsewhere" in text for text in summaries) == 2, outputs


def test_fixed_delay_is_end_to_start_and_a_slow_fixed_rate_never_overlaps(
    tmp_path: Path,
) -> None:
    delay_log, rate_log = tmp_path / "delay.log", tmp_path / "rate.log"
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="memory",
        FIREFLY_HOSTAPP_DELAY_LOG=str(delay_log),
        FIREFLY_HOSTAPP_RATE_LOG=str(rate_log),
    )
    node = start_node("run", "spacing", app="firefly_hostapps.spacing", env=env, workdir=tmp_path)
    assert node.wait_for_output(STARTED, timeout=30), node.text()
    time.sleep(5)
    assert node.stop() == 0, node.text()

    delayed = read_runs(delay_log)
    assert len(delayed) >= 4, node.text()
    gaps = [after.start - before.end for before, after in itertools.pairwise(delayed)]
    # 0.5 s from the end of one run (0.3 s body) to the start of the next: not 0.5 s
    # start to start, and never less than the delay.
    assert all(0.5 <= gap < 0.75 for gap in gaps), gaps

    slow = read_runs(rate_log)
    assert len(slow) >= 3, node.text()
    assert overlaps(slow) == []
    # Start to start on the 0.3 s epoch grid; fires that came during a run were skipped.
    assert all((run.start % 0.3) < 0.1 or (run.start % 0.3) > 0.29 for run in slow), slow
    # Said once by the host (a summary), not once per dropped run by APScheduler.
    assert node.text().count("passed over on this node") == 1, node.text()
    assert "maximum number of running instances reached" not in node.text()


@pytest.mark.parametrize("command", ["run", "tick"])
def test_a_bad_configuration_exits_2_with_the_message(tmp_path: Path, command: str) -> None:
    env = node_env(tmp_path, FIREFLY_SCHEDULING_LOCK_PROVIDER="zookeeper")
    node = start_node(command, "bad", app="firefly_hostapps.race", env=env, workdir=tmp_path)
    assert node.wait(timeout=30) == 2
    assert "unknown lock provider 'zookeeper'" in node.text()


def test_no_task_at_all_exits_2_saying_why(tmp_path: Path) -> None:
    env = node_env(tmp_path)
    node = start_node("run", "empty", app="firefly_hostapps.record", env=env, workdir=tmp_path)
    assert node.wait(timeout=30) == 2
    assert "no task found" in node.text()
