"""`run --health-port` answers Kubernetes probes truthfully, in a real process, over HTTP.

A private redis-server (started here, on its own port, never the shared one) is the
lock backend. While it runs, `/livez` and `/readyz` answer 200; once it is killed,
`/readyz` answers 503 naming the backend's error (no password) and the last error a
fire met, while `/livez` stays 200: the scheduler is alive, it cannot work. The
process then stops on SIGTERM and exits 0.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from firefly_scheduling.testing.local_server import LocalServer, free_local_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import node_env, start_node

from private_servers import redis_server

pytestmark = pytest.mark.slow

PASSWORD = "s3cret-health-pass"


def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # loopback
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _until(port: int, path: str, status: int, timeout: float) -> tuple[int, dict[str, object]]:
    deadline = time.monotonic() + timeout
    answer: tuple[int, dict[str, object]] = (0, {})
    while time.monotonic() < deadline:
        try:
            answer = _get(port, path)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            answer = (0, {})
        if answer[0] == status:
            return answer
        time.sleep(0.1)
    return answer


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[LocalServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    with LocalServer(redis_server("--requirepass", PASSWORD, "--dir", str(tmp_path))) as server:
        yield server


def test_readyz_follows_the_lock_backend_and_livez_the_scheduler_loop(
    tmp_path: Path, private_redis: LocalServer
) -> None:
    redis_port = private_redis.port
    health_port = free_local_port()
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="redis",
        FIREFLY_SCHEDULING_LOCK_REDIS_URL=(
            f"redis://:{PASSWORD}@127.0.0.1:{redis_port}/0?socket_timeout=1&socket_connect_timeout=1"
        ),
    )
    node = start_node(
        "run",
        "health-node",
        app="firefly_hostapps.health",
        env=env,
        workdir=tmp_path,
        args=("--health-port", str(health_port), "--health-host", "127.0.0.1"),
    )
    try:
        status, live = _until(health_port, "/livez", 200, 30)
        assert status == 200, node.text()
        assert live["status"] == "alive"
        time.sleep(2.5)  # a few beats of the scheduler's own thread
        status, live = _get(health_port, "/livez")
        assert status == 200
        assert int(str(live["beats"])) >= 2, live
        status, ready = _until(health_port, "/readyz", 200, 10)
        assert status == 200, (ready, node.text())
        assert ready["lock"] == {"ok": True, "error": None}
        assert _get(health_port, "/nowhere")[0] == 404

        private_redis.stop()  # the lock backend goes away
        status, ready = _until(health_port, "/readyz", 503, 15)
        assert status == 503, ready
        assert ready["status"] == "not ready"
        lock = ready["lock"]
        assert isinstance(lock, dict)
        assert lock["ok"] is False
        assert "redis" in str(lock["error"]).lower()
        deadline = time.monotonic() + 15  # a fire meets the outage too
        while ready.get("last_error") is None and time.monotonic() < deadline:
            time.sleep(0.5)
            _, ready = _get(health_port, "/readyz")
        assert ready["last_error"] is not None, ready
        assert PASSWORD not in json.dumps(ready)
        status, live = _get(health_port, "/livez")
        assert status == 200, live  # alive, only unable to work
    finally:
        node.terminate()
        exit_status = node.wait(timeout=60)
    assert exit_status == 0, node.text()
    assert PASSWORD not in node.text()
