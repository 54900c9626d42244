"""A node that runs one fire whose history goes dark between its body and its record.

    python finish_outage_node.py   (its orders in FIREFLY_OUTAGE_NODE, JSON)

Orders: `evidence` (the shared evidence log), `go` (a file the body waits for: the
test creates it once the node's history proxy is blackholed), `lock_url` (Redis),
`history_url` (MariaDB through the test's proxy), `table`, `target`, `instant`
(ISO 8601) and `finish_retry_seconds` (the runner's retry window for a finish,
shortened so the outage outlasts it within a few seconds).

The body stamps `start` and `end` events on the evidence log with the kernel's
monotonic clock; the node then closes its runner (which writes what it remembers)
and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

from firefly_scheduling.fires.outcome import Fire

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from chaos_harness.evidence import EvidenceLog
from firefly_scheduling.fires import recording
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_redis import RedisLock

#: How long the body waits for the test to cut its history off.
GO_WAIT_SECONDS = 60.0


def main() -> int:
    orders = json.loads(os.environ["FIREFLY_OUTAGE_NODE"])
    recording.FINISH_RETRY_SECONDS = float(orders["finish_retry_seconds"])
    evidence = EvidenceLog(Path(orders["evidence"]))
    go = Path(orders["go"])
    target, instant = orders["target"], datetime.fromisoformat(orders["instant"])
    descriptor = ScheduledDescriptor(target=target, lock_name=target, lock_ttl=2.0, fixed_rate=1.0)

    def body() -> None:
        evidence.append("start", node="A", instant=instant.isoformat())
        deadline = time.monotonic() + GO_WAIT_SECONDS
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        evidence.append("end", node="A", instant=instant.isoformat())

    lock = RedisLock(orders["lock_url"])
    history = SqlRunHistory(orders["history_url"], table=orders["table"])
    runner = FireRunner(lock, history=history, node="A")
    try:
        outcome = runner.run(Fire.at(descriptor, instant), body)
        evidence.append("outcome", node="A", verdict=outcome.verdict.name, fenced=outcome.fenced)
    finally:
        runner.close()
        history.close()
        lock.close()
        evidence.append("exit", node="A")
    return 0


if __name__ == "__main__":
    sys.exit(main())
