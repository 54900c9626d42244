"""`buffer_one` under a fault: the node holding the buffered fire is killed (SIGKILL).

Redis holds the locks, PostgreSQL the history. Node A (this process) runs the
task's first fire and holds its task lock. Node B, a separate process, gets the
second fire, which waits, buffered. B is killed while it waits. Then, as
documented: B's waiting slot lapses after `lock_ttl` (a third client can take it
again), B's fire is never run and its record stays `buffered`, and the next fire on
A waits in the slot and runs once the first run ended. The evidence is the Redis
server (the slot), the history read by a third client, and a file the bodies append
to with `O_APPEND`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.overlap_names import waiting_slots
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunState
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_redis import RedisLock

sys.path.insert(0, str(Path(__file__).resolve().parent))

pytestmark = pytest.mark.slow

T0 = datetime(2030, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
LOCK_TTL = 1.0
PATIENCE = 60.0

#: Node B: run the second fire of the task (it waits, buffered) until killed.
NODE_B = """
import os, sys
from datetime import UTC, datetime, timedelta
from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_redis import RedisLock

target = os.environ["TARGET"]
task = ScheduledDescriptor(
    target=target, lock_name=target, lock_ttl=1.0, fixed_rate=60.0, overlap="buffer_one"
)
history = SqlRunHistory(os.environ["PG_URL"], table=os.environ["TABLE"])
runner = FireRunner(
    RedisLock(os.environ["REDIS_URL"]),
    history=history,
    clock=lambda: datetime(2030, 1, 1, tzinfo=UTC),
    node="b",
    keepalive_interval=0.2,
)

def body():
    with open(os.environ["WITNESS"], "a") as witness:
        witness.write("b ran\\n")

runner.run(Fire.at(task, datetime(2030, 1, 1, 0, 1, tzinfo=UTC)), body)
"""


def _state(history: SqlRunHistory, target: str, instant: datetime) -> RunState | None:
    found = [r.state for r in history.runs(target, limit=50) if r.instant == instant]
    return found[0] if found else None


def _until(check: Callable[[], bool], what: str) -> None:
    give_up = time.monotonic() + PATIENCE
    while not check():
        assert time.monotonic() < give_up, what
        time.sleep(0.02)


def test_a_buffered_fire_whose_node_is_killed_never_runs_and_frees_the_slot_after_its_ttl(
    redis_url: str, postgres_url: str, history: SqlRunHistory, tmp_path: Path
) -> None:
    target = f"tests.overlap_fault_{uuid.uuid4().hex}:job"
    task = ScheduledDescriptor(
        target=target, lock_name=target, lock_ttl=LOCK_TTL, fixed_rate=60.0, overlap="buffer_one"
    )
    witness = tmp_path / "witness"
    witness.touch()
    node_a = FireRunner(
        RedisLock(redis_url), history=history, clock=lambda: T0, node="a", keepalive_interval=0.2
    )
    probe = RedisLock(redis_url)
    [slot] = waiting_slots(target, 1)
    release = threading.Event()

    def first_body() -> None:
        assert release.wait(PATIENCE)
        fd = os.open(witness, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"a ran 1\n")
        os.close(fd)

    def third_body() -> None:
        fd = os.open(witness, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"a ran 3\n")
        os.close(fd)

    env = {
        **os.environ,
        "TARGET": target,
        "PG_URL": postgres_url,
        "TABLE": history.table.name,
        "REDIS_URL": redis_url,
        "WITNESS": str(witness),
    }
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(node_a.run, Fire.at(task, T0), first_body)
        _until(lambda: _state(history, target, T0) is RunState.RUNNING, "the first fire never ran")
        node_b = subprocess.Popen([sys.executable, "-c", NODE_B], env=env)
        try:
            _until(
                lambda: _state(history, target, T0 + MINUTE) is RunState.BUFFERED,
                "node b's fire was never buffered",
            )
            assert not probe.try_acquire(slot, 5)  # node b holds the waiting slot
        finally:
            os.kill(node_b.pid, signal.SIGKILL)
            node_b.wait(PATIENCE)
        assert node_b.returncode == -signal.SIGKILL

        def slot_lapsed() -> bool:
            took = probe.try_acquire(slot, 5)
            if took:
                probe.release(slot)
            return took

        _until(slot_lapsed, "the dead node's waiting slot never lapsed")
        third = pool.submit(node_a.run, Fire.at(task, T0 + 2 * MINUTE), third_body)
        _until(
            lambda: _state(history, target, T0 + 2 * MINUTE) is RunState.BUFFERED,
            "the next fire never waited in the freed slot",
        )
        release.set()
        assert first.result(PATIENCE).verdict is Verdict.SUCCEEDED
        waited = third.result(PATIENCE)
    node_a.close()
    probe.close()

    assert waited.verdict is Verdict.SUCCEEDED
    assert witness.read_text().splitlines() == ["a ran 1", "a ran 3"]  # b's body never ran
    states = {r.instant: (r.state, r.node) for r in history.runs(target, limit=50)}
    assert states == {
        T0: (RunState.SUCCEEDED, "a"),
        T0 + MINUTE: (RunState.BUFFERED, "b"),
        T0 + 2 * MINUTE: (RunState.SUCCEEDED, "a"),
    }
