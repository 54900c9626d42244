"""`retries=` across real nodes: Redis holds the locks and claims, PostgreSQL the history.

Two `firefly-scheduling run` processes host an app whose failing tasks have retries
(`firefly_hostapps.retrying`). Each body writes its own run (node, fire, attempt,
start, end) to an `O_APPEND` witness file, and the history is read by a client of
its own: the evidence comes from neither node's view of itself.

* A body that always fails is run 1 + 2 times for its fire, attempts 1, 2 and 3,
  each once across both nodes, never two at a time; its record ends `failed` at
  attempt 3, and says it was retry 2 of 2.
* A body that fails once is run twice: its retry succeeds and no further retry runs.

Then one retry handed to two node processes at once (as two nodes that both learnt of
it would be) runs once: its claim, in Redis, and its conditional start on the
fire's record, in PostgreSQL, let only one of them run the body.

Last, a node that ran a failing fire and exited before its retry (a node that died)
loses nothing: a resident node that never ran the fire learns of the retry from the
history and runs it.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fresh_tables import default_history

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import HOST_APPS, STARTED, log_fields, node_env, start_node

from backend_matrix import lock_env
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import RunState
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_descriptor
from firefly_scheduling_database.sql_history.store import SqlRunHistory
from firefly_scheduling_redis import RedisLock

pytestmark = pytest.mark.slow

#: The tasks' period: the first fire comes within it, its retries well before the next.
RATE = "6"
#: How long the test waits for the witness lines of the first fires (a loaded machine).
PATIENCE = 90.0
HISTORY_TABLE = "firefly_scheduling_runs"


@dataclass(frozen=True)
class Witnessed:
    """One run, as its body wrote it."""

    node: str
    task: str
    instant: str
    attempt: int
    start: float
    end: float


def witnessed(path: Path) -> list[Witnessed]:
    runs = [
        Witnessed(node, task, instant, int(attempt), float(start), float(end))
        for node, task, instant, attempt, start, end in log_fields(path)
    ]
    return sorted(runs, key=lambda run: run.start)


def first_fire(runs: list[Witnessed], task: str) -> list[Witnessed]:
    """The runs of `task`'s first fire witnessed."""
    mine = [run for run in runs if run.task == task]
    return [run for run in mine if run.instant == mine[0].instant] if mine else []


def overlapping(runs: list[Witnessed]) -> list[tuple[Witnessed, Witnessed]]:
    ordered = sorted(runs, key=lambda run: run.start)
    return [(a, b) for a, b in itertools.pairwise(ordered) if b.start < a.end]


@pytest.fixture
def history(postgres_url: str) -> Iterator[SqlRunHistory]:
    """A second client of the nodes' history: the default table of the database."""
    with default_history(postgres_url) as history:
        yield history


def _nodes_setup(
    prefix: str, tmp_path: Path, redis_url: str, postgres_url: str, rate: str | None = None
) -> tuple[str, Path, dict[str, str]]:
    """A fresh lock name, the witness file, and the nodes' environment: Redis locks, the
    history on PostgreSQL, the host app's fixed rate where given."""
    lock = f"{prefix}-{uuid.uuid4().hex}"
    witness = tmp_path / "witness.log"
    rated = {} if rate is None else {"FIREFLY_HOSTAPP_RATE": rate}
    env = node_env(
        tmp_path,
        FIREFLY_HOSTAPP_WITNESS=str(witness),
        FIREFLY_HOSTAPP_LOCK=lock,
        FIREFLY_SCHEDULING_HISTORY_URL=postgres_url,
        **rated,
        **lock_env("redis", {"redis": redis_url}, tmp_path),
    )
    return lock, witness, env


def test_two_nodes_run_each_retry_once_never_overlapping(
    tmp_path: Path, redis_url: str, postgres_url: str, history: SqlRunHistory
) -> None:
    lock, witness, env = _nodes_setup("retrying", tmp_path, redis_url, postgres_url, RATE)
    nodes = [
        start_node(
            "run", f"retry-node-{n}", app="firefly_hostapps.retrying", env=env, workdir=tmp_path
        )
        for n in (1, 2)
    ]
    try:
        for node in nodes:
            assert node.wait_for_output(STARTED, timeout=60), node.text()[-2000:]
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            runs = witnessed(witness)
            if len(first_fire(runs, "always_fails")) >= 3 and first_fire(runs, "fails_once"):
                break
            time.sleep(0.1)
        # Long enough for a further retry to show, were one (wrongly) run: the largest
        # backoff is 600 ms.
        time.sleep(2.0)
    finally:
        exit_codes = [node.stop() for node in nodes]
    outputs = "\n".join(f"--- {node.name}\n{node.text()[-3000:]}" for node in nodes)
    assert exit_codes == [0, 0], outputs
    runs = witnessed(witness)

    failing = first_fire(runs, "always_fails")
    assert [run.attempt for run in failing] == [1, 2, 3], outputs
    assert overlapping(failing) == []
    once = first_fire(runs, "fails_once")
    assert [run.attempt for run in once] == [1, 2], outputs
    assert overlapping(once) == []

    # The history, read by a client of its own.
    instant = datetime.fromisoformat(failing[0].instant)
    [record] = [r for r in history.runs(lock=f"{lock}-always", limit=50) if r.instant == instant]
    assert (record.state, record.attempt) == (RunState.FAILED, 3)
    assert record.error is not None
    assert record.error.startswith("retry 2 of 2; RuntimeError: always_fails fails (attempt 3)")
    assert record.node in {node.name for node in nodes}
    instant = datetime.fromisoformat(once[0].instant)
    [record] = [r for r in history.runs(lock=f"{lock}-once", limit=50) if r.instant == instant]
    assert (record.state, record.attempt, record.error) == (RunState.SUCCEEDED, 2, "retry 1 of 3")


#: A node process handed one retry: it waits for the retry's due time, runs it, and
#: prints its verdict. The body appends its node to the witness file.
RETRY_NODE = textwrap.dedent(
    """
    import json, os, sys, time
    from datetime import datetime
    from firefly_scheduling.fires.outcome import Fire, TriggerKind
    from firefly_scheduling.fires.retries import RetryOf
    from firefly_scheduling.fires.runner import FireRunner
    from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
    from firefly_scheduling.tasks.validation import validate_descriptor
    from firefly_scheduling_database.sql_history.store import SqlRunHistory
    from firefly_scheduling_redis import RedisLock

    node, redis_url, postgres_url, table, given = sys.argv[1:6]
    given = json.loads(given)
    task = validate_descriptor(ScheduledDescriptor(**given["task"]))
    due = datetime.fromisoformat(given["due"])
    retry = Fire.at(task, datetime.fromisoformat(given["instant"]))
    retry = Fire(task, retry.instant, TriggerKind.RETRY, RetryOf(1, 2, due, 1))

    def body():
        fd = os.open(given["witness"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"{node}\\n".encode())
        os.close(fd)
        time.sleep(0.2)
        raise RuntimeError("the retry fails too")

    runner = FireRunner(RedisLock(redis_url), history=SqlRunHistory(postgres_url, table=table),
                        node=node)
    time.sleep(max(0.0, due.timestamp() - time.time()))
    result = runner.run(retry, body)
    print(json.dumps({"verdict": result.verdict.name, "attempt": result.attempt}))
    runner.close()
    """
)


def test_one_retry_handed_to_two_nodes_runs_once(
    tmp_path: Path, redis_url: str, postgres_url: str, history: SqlRunHistory
) -> None:
    target = f"tests.retries_{uuid.uuid4().hex}:job"
    fields = {
        "target": target,
        "lock_name": target,
        "lock_ttl": 30.0,
        "cron": "0 0 1 1 *",  # yearly: its next fire never comes before the retry
        "retries": 2,
        "retry_backoff": 1.0,
        "retry_backoff_max": 1.0,
    }
    task = validate_descriptor(ScheduledDescriptor(**fields))  # type: ignore[arg-type]
    instant = datetime.now(UTC)
    first = FireRunner(RedisLock(redis_url), history=history, node="first")

    def fails() -> None:
        raise RuntimeError("the first run fails")

    try:
        failed = first.run(
            Fire.at(
                task,
                instant,
            ),
            fails,
        )
    finally:
        first.close()
    assert failed.verdict is Verdict.FAILED
    assert failed.retry is not None
    assert failed.retry.retry is not None
    witness = tmp_path / "witness.log"
    given = json.dumps(
        {
            "task": fields,
            "instant": instant.isoformat(),
            "due": failed.retry.retry.due.isoformat(),
            "witness": str(witness),
        }
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                RETRY_NODE,
                f"node-{n}",
                redis_url,
                postgres_url,
                HISTORY_TABLE,
                given,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in (1, 2)
    ]
    answers = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err[-3000:]
        answers.append(json.loads(out.splitlines()[-1]))
    verdicts = sorted(answer["verdict"] for answer in answers)
    assert verdicts == ["CLAIMED_ELSEWHERE", "FAILED"], answers
    assert len(witness.read_text().splitlines()) == 1  # one body ran, in one process
    [record] = history.runs(target, limit=5, lock=target)
    assert (record.state, record.attempt) == (RunState.FAILED, 2)
    assert record.error is not None
    assert record.error.startswith("retry 1 of 2; RuntimeError: the retry fails too")


#: A node that runs one fire of `firefly_hostapps.retry_pickup` (manual: not on its
#: yearly schedule), then exits before the retry its failure asks for: a node that died.
DYING_NODE = textwrap.dedent(
    """
    import json, sys
    from datetime import UTC, datetime
    from firefly_hostapps import retry_pickup
    from firefly_scheduling.fires.outcome import Fire, TriggerKind
    from firefly_scheduling.fires.runner import FireRunner
    from firefly_scheduling.tasks.decorator import descriptor_of
    from firefly_scheduling_database.sql_history.store import SqlRunHistory
    from firefly_scheduling_redis import RedisLock

    redis_url, postgres_url, table = sys.argv[1:4]
    task = descriptor_of(retry_pickup.picked_up)
    runner = FireRunner(RedisLock(redis_url), history=SqlRunHistory(postgres_url, table=table),
                        node="dying-node")
    fire = Fire.at(task, datetime.now(UTC), TriggerKind.MANUAL)
    result = runner.run(fire, retry_pickup.picked_up)
    runner.close()
    print(json.dumps({"verdict": result.verdict.name, "instant": fire.instant.isoformat(),
                      "retry": None if result.retry is None else str(result.retry.retry)}))
    """
)


def test_a_retry_whose_node_died_is_run_by_another_node(
    tmp_path: Path, redis_url: str, postgres_url: str, history: SqlRunHistory
) -> None:
    lock, witness, env = _nodes_setup("retry-pickup", tmp_path, redis_url, postgres_url)
    survivor = start_node(
        "run", "surviving-node", app="firefly_hostapps.retry_pickup", env=env, workdir=tmp_path
    )
    try:
        assert survivor.wait_for_output(STARTED, timeout=60), survivor.text()[-2000:]
        dying = subprocess.run(
            [sys.executable, "-c", DYING_NODE, redis_url, postgres_url, HISTORY_TABLE],
            capture_output=True,
            text=True,
            env={**env, "PYTHONPATH": str(HOST_APPS), "FIREFLY_SCHEDULING_NODE": "dying-node"},
            timeout=120,
            check=False,
        )
        assert dying.returncode == 0, dying.stderr[-3000:]
        ran = json.loads(dying.stdout.splitlines()[-1])
        assert (ran["verdict"], ran["retry"]) == ("FAILED", "retry 1 of 2")
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline and len(witness.read_text().splitlines()) < 2:
            time.sleep(0.1)
    finally:
        exit_code = survivor.stop()
    assert exit_code == 0, survivor.text()[-3000:]
    assert witness.read_text().splitlines() == [
        f"dying-node {ran['instant']} 1",
        f"surviving-node {ran['instant']} 2",
    ], survivor.text()[-3000:]
    [record] = history.runs(lock=lock, limit=5)
    assert (record.state, record.attempt, record.node, record.error) == (
        RunState.SUCCEEDED,
        2,
        "surviving-node",
        "retry 1 of 2",
    )
