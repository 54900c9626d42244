"""Graceful shutdown of `firefly-scheduling tick`, in a real process, on a real Redis.

A CronJob's pod is sent SIGTERM when it is deleted or reaches its deadline. The
pass must then start no further slot, let a running body finish within the grace
period, release its locks and exit 0. Redis is a lease backend: a lock the process
failed to release would stay taken for its whole 60 s TTL, so "the lock is free
right after exit" proves the release.
"""

from __future__ import annotations

import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import Node, node_env, read_runs, start_node

from firefly_scheduling_redis import RedisLock

pytestmark = pytest.mark.slow


def _wait_for_early_minute() -> None:
    """Sleep (at most ~25 s) until 25 s of the minute are left, so the pass is not ending."""
    second = datetime.now(UTC).second
    if second > 35:
        time.sleep(60 - second + 0.2)


def _start(
    tmp_path: Path, redis_url: str, *, body: float, grace: float
) -> tuple[Node, str, Path, Path]:
    lock_name = f"hostapps-tick-shutdown-{uuid.uuid4().hex}"
    started, log = tmp_path / "started", tmp_path / "runs.log"
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="redis",
        FIREFLY_SCHEDULING_LOCK_REDIS_URL=redis_url,
        FIREFLY_HOSTAPP_LOCK=lock_name,
        FIREFLY_HOSTAPP_LOG=str(log),
        FIREFLY_HOSTAPP_STARTED=str(started),
        FIREFLY_HOSTAPP_BODY=str(body),
    )
    _wait_for_early_minute()
    node = start_node(
        "tick",
        "tick-shutdown",
        app="firefly_hostapps.tick_shutdown",
        env=env,
        workdir=tmp_path,
        args=("--grace-period", str(grace)),
    )
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline and node.process.poll() is None:
        time.sleep(0.02)
    assert started.exists(), node.text()
    return node, lock_name, log, started


def _lock_is_free(redis_url: str, name: str) -> bool:
    probe = RedisLock(redis_url)
    try:
        acquired = probe.try_acquire(name, 5)
        if acquired:
            probe.release(name)
        return acquired
    finally:
        probe.close()


def _minute_end(moment: float) -> float:
    return moment - moment % 60 + 60


def test_sigterm_lets_the_running_body_finish_then_exits_0_before_the_minute_ends(
    tmp_path: Path, redis_url: str
) -> None:
    node, lock_name, log, _ = _start(tmp_path, redis_url, body=3.0, grace=10.0)
    time.sleep(0.5)
    assert not _lock_is_free(redis_url, lock_name)  # held while the body runs
    signalled = time.time()
    node.terminate()
    assert node.wait(timeout=30) == 0, node.text()
    exited = time.time()
    runs = read_runs(log)
    assert len(runs) == 1, node.text()  # no slot started after the signal
    assert runs[0].end - runs[0].start >= 3.0  # the body was not cut short
    assert signalled < runs[0].end <= exited  # it finished after the signal, before exit
    assert exited < _minute_end(signalled)  # the pass stopped early, not at the minute's end
    assert _lock_is_free(redis_url, lock_name)
    assert "received SIGTERM" in node.text()
    assert "stopped early" in node.text()


def test_sigterm_between_slots_exits_0_at_once(tmp_path: Path, redis_url: str) -> None:
    node, _, log, started = _start(tmp_path, redis_url, body=0.05, grace=10.0)
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
    tmp_path: Path, redis_url: str
) -> None:
    node, lock_name, log, _ = _start(tmp_path, redis_url, body=20.0, grace=1.0)
    node.terminate()
    assert node.wait(timeout=15) == 0, node.text()
    assert read_runs(log) == []  # the body never finished
    assert "still running" in node.text()
    assert "1 run(s) abandoned" in node.text()
    # Issue 8.7: the host used to release it while the body still ran, letting another
    # node start the task beside it. It now ends with its TTL (a session, with the process).
    assert not _lock_is_free(redis_url, lock_name)
