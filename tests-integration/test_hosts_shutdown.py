"""Graceful shutdown of `firefly-scheduling run`, in a real process, on a real Redis.

Redis is a lease backend: a lock the host failed to release would stay taken for
its whole 60 s TTL, so "the lock is free right after exit" proves the release.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import Node, node_env, read_runs, start_node

from firefly_scheduling_redis import RedisLock

pytestmark = pytest.mark.slow


def _start(tmp_path: Path, redis_url: str, *, body: float, grace: float) -> tuple[Node, str, Path]:
    lock_name = f"hostapps-shutdown-{uuid.uuid4().hex}"
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
    node = start_node(
        "run",
        "shutdown-node",
        app="firefly_hostapps.shutdown",
        env=env,
        workdir=tmp_path,
        args=("--grace-period", str(grace)),
    )
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline and node.process.poll() is None:
        time.sleep(0.02)
    assert started.exists(), node.text()
    return node, lock_name, log


def _lock_is_free(redis_url: str, name: str) -> bool:
    probe = RedisLock(redis_url)
    try:
        acquired = probe.try_acquire(name, 5)
        if acquired:
            probe.release(name)
        return acquired
    finally:
        probe.close()


def test_sigterm_lets_a_running_body_finish_then_frees_the_lock(
    tmp_path: Path, redis_url: str
) -> None:
    node, lock_name, log = _start(tmp_path, redis_url, body=3.0, grace=10.0)
    time.sleep(0.5)
    assert not _lock_is_free(redis_url, lock_name)  # held while the body runs
    signalled = time.time()
    node.terminate()
    assert node.wait(timeout=30) == 0, node.text()
    exited = time.time()
    runs = read_runs(log)
    assert len(runs) == 1, node.text()
    assert runs[0].end - runs[0].start >= 3.0  # the body was not cut short
    assert signalled < runs[0].end <= exited  # it finished after the signal, before exit
    assert _lock_is_free(redis_url, lock_name)
    assert "resident host stopped" in node.text()


def test_a_body_outliving_the_grace_period_is_abandoned_with_its_lock_held(
    tmp_path: Path, redis_url: str
) -> None:
    node, lock_name, log = _start(tmp_path, redis_url, body=20.0, grace=1.0)
    node.terminate()
    assert node.wait(timeout=15) == 0, node.text()
    assert read_runs(log) == []  # the body never finished
    assert "still running" in node.text()
    # Issue 8.7: the host used to release it while the body still ran, letting another
    # node start the task beside it. It now ends with its TTL (a session, with the process).
    assert not _lock_is_free(redis_url, lock_name)
