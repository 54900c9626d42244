"""`catchup=` on real servers, with real node processes: the fires a downed fleet missed.

PostgreSQL holds the run history, and the task lock and the fire claims (the two-node
case runs a second time with those on Redis). The fleet ran a one-minute task until
some minutes ago, then went down as a whole (the history's records stop there); two
`firefly-scheduling run` nodes then start together. Each
missed fire must run exactly once between them, oldest first, as each body's own
line in a witness file shows; the ones beyond `catchup_limit` are recorded as
skipped with the reason. Without a run history, boot refuses `catchup=` (exit 2).

Evidence is what the processes did: the lines their task bodies wrote, their exit
status and output, and the run history as a second client reads it.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from firefly_scheduling.history.port import RunRecord, RunState
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import Node, node_env, start_node, wait_for, wait_for_early_minute

pytestmark = pytest.mark.slow

TARGET = "firefly_hostapps.catching_up:every_minute"
APP = "firefly_hostapps.catching_up"
MINUTE = timedelta(minutes=1)
#: How long the nodes get to catch up (a loaded machine, two process boots).
PATIENCE = 90.0


def _minute(instant: datetime) -> datetime:
    return instant.replace(second=0, microsecond=0)


def _fleet_ran_until(history: SqlRunHistory, lock: str, down_at: datetime) -> None:
    """The fleet's records before the outage: every fire of the 70 minutes to `down_at`
    (the nodes' window is an hour)."""
    for back in range(70):
        instant = down_at - back * MINUTE
        history.start(TARGET, instant, lock=lock, node="gone", token=None, at=instant)
        history.finish(
            TARGET, instant, lock=lock, token=None, state=RunState.SUCCEEDED, error=None, at=instant
        )


def _start_fleet(
    postgres_url: str, tmp_path: Path, lock: str, limit: int, redis_url: str | None = None
) -> list[Node]:
    """Two `run` nodes: the lock and claims on PostgreSQL, or on Redis when given."""
    provider = "postgres" if redis_url is None else "redis"
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER=provider,
        **{f"FIREFLY_SCHEDULING_LOCK_{provider.upper()}_URL": redis_url or postgres_url},
        FIREFLY_SCHEDULING_HISTORY_URL=postgres_url,
        FIREFLY_HOSTAPP_LOCK=lock,
        FIREFLY_HOSTAPP_CATCHUP="1h",
        FIREFLY_HOSTAPP_CATCHUP_LIMIT=str(limit),
        FIREFLY_HOSTAPP_LOG=str(tmp_path / "witness.log"),
        # Long enough for the second node to boot while the first still catches up.
        FIREFLY_HOSTAPP_BODY_SECONDS="0.1",
    )
    return [start_node("run", name, app=APP, env=env, workdir=tmp_path) for name in ("a", "b")]


def _witness(path: Path) -> list[tuple[str, str, datetime]]:
    """Each body's line, in the order the bodies wrote them: node, trigger, instant."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [
        (node, trigger, datetime.fromisoformat(instant))
        for node, trigger, instant in (line.split() for line in lines)
    ]


def _records(history: SqlRunHistory, lock: str) -> dict[datetime, RunRecord]:
    return {record.instant: record for record in history.runs(TARGET, 1000, lock=lock)}


def _stop(nodes: list[Node]) -> None:
    for node in nodes:
        node.terminate()
    for node in nodes:
        node.wait(30)


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_two_nodes_starting_after_the_fleet_was_down_run_each_missed_fire_once_oldest_first(
    backend: str, postgres_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    missed = 40
    redis_url = str(request.getfixturevalue("redis_url")) if backend == "redis" else None
    wait_for_early_minute()  # the nodes start within the minute the test computes
    lock = f"catch-up-fleet-{uuid.uuid4().hex[:12]}"
    now = _minute(datetime.now(UTC))
    down_at = now - missed * MINUTE
    expected = [down_at + step * MINUTE for step in range(1, missed + 1)]
    reader = SqlRunHistory(postgres_url)
    try:
        _fleet_ran_until(reader, lock, down_at)
        nodes = _start_fleet(postgres_url, tmp_path, lock, limit=100, redis_url=redis_url)
        try:
            assert wait_for(tmp_path / "witness.log", missed, PATIENCE), [n.text() for n in nodes]
            time.sleep(1.0)  # a duplicate run, were there one, would show by now
        finally:
            _stop(nodes)
        witness = _witness(tmp_path / "witness.log")
        caught_up = [instant for _, trigger, instant in witness if trigger == "catch-up"]
        every_run = Counter(instant for _, _, instant in witness)
        assert [i for i, runs in every_run.items() if runs > 1] == [], witness
        assert sorted(caught_up)[:missed] == expected, witness
        assert caught_up == sorted(caught_up), "not run oldest first"
        records = _records(reader, lock)
        assert {records[i].state for i in expected} == {RunState.CAUGHT_UP}
        assert all("caught up" in (records[i].error or "") for i in expected)
        assert {records[i].node for i in expected} <= {"a", "b"}
        # Both nodes found the missed fires: they caught up at the same time.
        assert all("missed fire(s) in its catch-up window" in node.text() for node in nodes), [
            node.text() for node in nodes
        ]
    finally:
        reader.close()


def test_missed_fires_beyond_the_limit_are_recorded_as_skipped_with_the_reason(
    postgres_url: str, tmp_path: Path
) -> None:
    wait_for_early_minute()
    lock = f"catch-up-limit-{uuid.uuid4().hex[:12]}"
    now = _minute(datetime.now(UTC))
    down_at = now - 25 * MINUTE
    missed = [down_at + step * MINUTE for step in range(1, 26)]
    reader = SqlRunHistory(postgres_url)
    try:
        _fleet_ran_until(reader, lock, down_at)
        nodes = _start_fleet(postgres_url, tmp_path, lock, limit=10)
        try:
            assert wait_for(tmp_path / "witness.log", 10, PATIENCE), [n.text() for n in nodes]
            time.sleep(1.0)
        finally:
            _stop(nodes)
        witness = _witness(tmp_path / "witness.log")
        caught_up = [instant for _, trigger, instant in witness if trigger == "catch-up"]
        assert caught_up[:10] == missed[15:]
        records = _records(reader, lock)
        for instant in missed[:15]:
            record = records[instant]
            assert record.state is RunState.SKIPPED
            assert record.error is not None
            assert record.error.startswith("skipped: beyond catchup_limit=10 of 25 missed fires")
        assert {records[i].state for i in missed[15:]} == {RunState.CAUGHT_UP}
    finally:
        reader.close()


def test_boot_refuses_catchup_without_a_run_history(postgres_url: str, tmp_path: Path) -> None:
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="postgres",
        FIREFLY_SCHEDULING_LOCK_POSTGRES_URL=postgres_url,
        FIREFLY_SCHEDULING_HISTORY_URL="off",
        FIREFLY_HOSTAPP_LOCK=f"catch-up-off-{uuid.uuid4().hex[:12]}",
        FIREFLY_HOSTAPP_CATCHUP="2h",
        FIREFLY_HOSTAPP_CATCHUP_LIMIT="100",
        FIREFLY_HOSTAPP_LOG=str(tmp_path / "witness.log"),
    )
    for command in ("run", "tick"):
        node = start_node(command, f"refused-{command}", app=APP, env=env, workdir=tmp_path)
        assert node.wait(60) == 2, node.text()
        output = node.text()
        assert TARGET in output
        assert "catchup='2h'" in output
        assert "FIREFLY_SCHEDULING_HISTORY_URL=off" in output
    assert not (tmp_path / "witness.log").exists()
