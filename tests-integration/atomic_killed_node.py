"""A node killed inside `current_fire().atomic(...)`, before its transaction commits.

Run by `test_atomic_outcome_killed.py` as a process of its own: it runs one fire
with a lease lock and the SQL history in the application's database; the body opens
a session, enters the block, writes its application row (sent to the server), says so
in a marker file, and waits to be killed (SIGKILL) by the test.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.orm import Session

from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database import DatabaseLeaseLock
from firefly_scheduling_database.sql_history.store import SqlRunHistory

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atomic_clients import app_url


def main() -> None:
    orders = json.loads(os.environ["FIREFLY_ATOMIC_NODE"])
    engine = sa.create_engine(app_url(orders["url"]))
    app = sa.Table(orders["app_table"], sa.MetaData(), autoload_with=engine)
    marker = Path(orders["marker"])

    def body() -> None:
        running = current_fire()
        assert running is not None
        with Session(engine) as session, session.begin(), running.atomic(session):
            session.execute(sa.insert(app).values(fire=running.idempotency_key, attempt=1))
            facts = {"key": running.idempotency_key, "attempt": running.attempt}
            marker.write_text(json.dumps(facts))
            time.sleep(600)  # killed here, its transaction open

    descriptor = ScheduledDescriptor(
        target=orders["target"],
        lock_name=orders["target"],
        lock_ttl=orders["lock_ttl"],
        fixed_rate=1.0,
    )
    lock = DatabaseLeaseLock(orders["lock_url"], table=orders["lock_table"])
    history = SqlRunHistory(orders["url"], table=orders["history_table"])
    instant = datetime.fromisoformat(orders["instant"])
    FireRunner(lock, history=history, node="A").run(Fire.at(descriptor, instant), body)


if __name__ == "__main__":
    main()
