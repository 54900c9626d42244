"""Graceful shutdown of both hosts, in a real process, on a real Redis.

`firefly-scheduling run` (a resident host) and `firefly-scheduling tick` (a
CronJob's pass, sent SIGTERM when its pod is deleted or reaches its deadline) keep
one rule: on SIGTERM start nothing more, let a running body finish within the grace
period, release its locks and exit 0; a body outliving the grace period is abandoned
with its lock held. Redis is a lease backend: a lock the process failed to release
would stay taken for its whole 60 s TTL, so "the lock is free right after exit"
proves the release.
"""

from __future__ import annotations

import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import (
    Node,
    lock_is_free,
    node_env,
    read_runs,
    start_node,
    wait_for_early_minute,
)

from firefly_scheduling_redis import RedisLock

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Host:
    """One host command, how often the app's task is due, and what it prints when it stops."""

    command: str
    #: `FIREFLY_HOSTAPP_RATE`: empty for a `fixed_delay` task.
    rate: str
    #: Lines its output holds after a SIGTERM that let the running body finish.
    stopped: tuple[str, ...]
    #: Lines its output holds after a SIGTERM that abandoned a body.
    abandoned: tuple[str, ...]


HOSTS = {
    # A `fixed_delay` task: its first run starts as soon as the host does.
    "run": Host("run", "", ("resident host stopped",), ("still running",)),
    # A task due every second: a stop request finds the pass in a body or between slots.
    "tick": Host(
        "tick",
        "1s",
        ("received SIGTERM", "stopped early"),
        ("still running", "1 run(s) abandoned"),
    ),
}


@pytest.fixture(params=sorted(HOSTS))
def host(request: pytest.FixtureRequest) -> Host:
    return HOSTS[request.param]


def _minute_end(moment: float) -> float:
    return moment - moment % 60 + 60


def _start(
    host: Host, tmp_path: Path, redis_url: str, *, body: float, grace: float
) -> tuple[Node, str, Path, Path]:
    lock_name = f"hostapps-{host.command}-shutdown-{uuid.uuid4().hex}"
    started, log = tmp_path / "started", tmp_path / "runs.log"
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="redis",
        FIREFLY_SCHEDULING_LOCK_REDIS_URL=redis_url,
        FIREFLY_HOSTAPP_LOCK=lock_name,
        FIREFLY_HOSTAPP_LOG=str(log),
        FIREFLY_HOSTAPP_STARTED=str(started),
        FIREFLY_HOSTAPP_BODY=str(body),
        FIREFLY_HOSTAPP_RATE=host.rate,
    )
    if host.command == "tick":
        wait_for_early_minute()
    node = start_node(
        host.command,
        f"{host.command}-shutdown",
        app="firefly_hostapps.shutdown",
        env=env,
        workdir=tmp_path,
        args=("--grace-period", str(grace)),
    )
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline and node.process.poll() is None:
        time.sleep(0.02)
    assert started.exists(), node.text()
    return node, lock_name, log, started


def test_sigterm_lets_a_running_body_finish_then_frees_the_lock(
    host: Host, tmp_path: Path, redis_url: str
) -> None:
    node, lock_name, log, _ = _start(host, tmp_path, redis_url, body=3.0, grace=10.0)
    time.sleep(0.5)
    assert not lock_is_free(RedisLock(redis_url), lock_name)  # held while the body runs
    signalled = time.time()
    node.terminate()
    assert node.wait(timeout=30) == 0, node.text()
    exited = time.time()
    runs = read_runs(log)
    assert len(runs) == 1, node.text()  # nothing started after the signal
    assert runs[0].end - runs[0].start >= 3.0  # the body was not cut short
    assert signalled < runs[0].end <= exited  # it finished after the signal, before exit
    if host.command == "tick":
        assert exited < _minute_end(signalled)  # the pass stopped early, not at the minute's end
    assert lock_is_free(RedisLock(redis_url), lock_name)
    for line in host.stopped:
        assert line in node.text()


def test_sigterm_between_tick_slots_exits_0_at_once(tmp_path: Path, redis_url: str) -> None:
    node, _, log, started = _start(HOSTS["tick"], tmp_path, redis_url, body=0.05, grace=10.0)
    deadline = time.monotonic() + 10
    while len(read_runs(log)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # a few quick runs: the process now mostly sleeps between slots
    signalled = time.monotonic()
    node.terminate()
    assert node.wait(timeout=30) == 0, node.text()
    assert time.monotonic() - signalled < 3.0, node.text()
    assert "stopped early" in node.text()
    assert started.exists()


def test_a_body_outliving_the_grace_period_is_abandoned_with_its_lock_held(
    host: Host, tmp_path: Path, redis_url: str
) -> None:
    node, lock_name, log, _ = _start(host, tmp_path, redis_url, body=20.0, grace=1.0)
    node.terminate()
    assert node.wait(timeout=15) == 0, node.text()
    assert read_runs(log) == []  # the body never finished
    for line in host.abandoned:
        assert line in node.text()
    # Released while the body still ran, the lock would let another node start the
    # task beside it: it ends with its TTL instead (a session, with the process).
    assert not lock_is_free(RedisLock(redis_url), lock_name)
