"""A fire whose body ended is never adopted and run again, however long its record waits.

Node A (a process of its own, `finish_outage_node.py`) runs a fire with a Redis task
lock and a MariaDB run history reached through a TCP proxy. Between its body's end
and its record, the test blackholes that proxy for longer than A's finish retry
window. Node B (this process: its own Redis client and its own connection to the
history) runs the task's next fires meanwhile, once a second.

Before, A gave up on the finish once its window had passed, released the task
lock, and B took it, found A's record still `running`, adopted the fire and ran it
a second time. Now A keeps the task lock renewed until its record is written, so B
finds the lock held (its fires are skipped as overlapping) until the record says
`succeeded`, and adopts nothing.

The evidence is outside A: each body stamps its start on a shared log with the
kernel's monotonic clock, and a second client reads the history.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pymysql
import pytest
from sqlalchemy.engine import make_url

from chaos_harness.evidence import EvidenceLog, read_events
from chaos_harness.proxy import FaultyProxy
from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_mysql.url import connection_arguments
from firefly_scheduling_redis import RedisLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_tables import installed_history
from python_runs import orders_env, start_python

NODE_SCRIPT = Path(__file__).resolve().parent / "finish_outage_node.py"
#: A's window for retrying a finish, and the outage of its history: longer.
FINISH_RETRY_SECONDS = 1.0
OUTAGE_SECONDS = 4.0
#: Node B keeps firing this long after the outage ends, to give an adoption its chance.
AFTER_SECONDS = 4.0
#: The history client's timeouts through the proxy: a dropped reply fails in a second.
CLIENT_TIMEOUTS = {"connect_timeout": "1", "read_timeout": "1", "write_timeout": "1"}


@pytest.fixture
def table(mysql_url: str) -> Iterator[str]:
    with installed_history(mysql_url) as store:
        yield store.table.name


@pytest.fixture
def proxy(mysql_url: str) -> Iterator[FaultyProxy]:
    parts = make_url(mysql_url)
    running = FaultyProxy(parts.host or "127.0.0.1", parts.port or 3306).start()
    try:
        yield running
    finally:
        running.close()


def through(mysql_url: str, proxy: FaultyProxy) -> str:
    url = make_url(mysql_url).set(host="127.0.0.1", port=proxy.port)
    return url.update_query_dict(CLIENT_TIMEOUTS).render_as_string(hide_password=False)


def wait_for(evidence: Path, kind: str, seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = [e for e in read_events(evidence) if e["ev"] == kind]
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"no {kind!r} event within {seconds} s")


def record_of(mysql_url: str, table: str, target: str, instant: datetime) -> dict[str, Any]:
    reader = pymysql.connect(**connection_arguments(mysql_url), autocommit=True)
    try:
        with reader.cursor(pymysql.cursors.DictCursor) as cursor:
            cursor.execute(
                f"SELECT node, attempt, state FROM `{table}` WHERE task = %s AND instant = %s",
                (target, instant.replace(tzinfo=None)),
            )
            rows = list(cursor.fetchall())
    finally:
        reader.close()
    assert len(rows) == 1, rows
    return rows[0]


def test_a_finished_fire_is_not_run_again_while_its_history_is_down(
    mysql_url: str, redis_url: str, table: str, proxy: FaultyProxy, tmp_path: Path
) -> None:
    evidence_path, go = tmp_path / "evidence.jsonl", tmp_path / "go"
    target = f"tests.outage_{uuid.uuid4().hex}:job"
    instant = datetime.now(UTC).replace(microsecond=0)
    orders = {
        "evidence": str(evidence_path),
        "go": str(go),
        "lock_url": redis_url,
        "history_url": through(mysql_url, proxy),
        "table": table,
        "target": target,
        "instant": instant.isoformat(),
        "finish_retry_seconds": FINISH_RETRY_SECONDS,
    }
    node_a = start_python(NODE_SCRIPT, env=orders_env("FIREFLY_OUTAGE_NODE", orders))
    evidence = EvidenceLog(evidence_path)
    lock = RedisLock(redis_url)
    history = SqlRunHistory(mysql_url, table=table)
    node_b = FireRunner(lock, history=history, node="B")
    descriptor = ScheduledDescriptor(target=target, lock_name=target, lock_ttl=2.0, fixed_rate=1.0)
    verdicts: list[Verdict] = []
    try:
        wait_for(evidence_path, "start", 60)
        proxy.blackhole(OUTAGE_SECONDS)
        go.touch()

        def body_b() -> None:
            running = current_fire()  # the adopted fire's instant, when it adopts
            assert running is not None
            evidence.append("start", node="B", instant=running.instant.isoformat())

        fire = instant + timedelta(seconds=1)
        until = time.monotonic() + OUTAGE_SECONDS + AFTER_SECONDS
        while time.monotonic() < until:
            while fire <= datetime.now(UTC) - timedelta(seconds=1):
                fire += timedelta(seconds=1)  # only fires due now, never a backlog
            time.sleep(max(0.0, (fire - datetime.now(UTC)).total_seconds()))
            outcome = node_b.run(Fire.at(descriptor, fire), body_b)
            verdicts.append(outcome.verdict)
            for adopted in outcome.adopted:
                verdicts.append(adopted.verdict)
            fire += timedelta(seconds=1)
        assert node_a.wait(60) == 0
    finally:
        if node_a.poll() is None:
            node_a.kill()
        node_b.close()
        history.close()
        lock.close()
        evidence.close()

    stamped = read_events(evidence_path)
    runs_of_the_fire = [
        e for e in stamped if e["ev"] == "start" and e["instant"] == instant.isoformat()
    ]
    assert [e["node"] for e in runs_of_the_fire] == ["A"], "the finished fire ran again"
    assert Verdict.SUCCEEDED in verdicts, "node B never got the task lock: nothing was tested"
    record = record_of(mysql_url, table, target, instant)
    assert (record["node"], record["attempt"], record["state"]) == ("A", 1, "succeeded")
