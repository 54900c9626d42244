"""contrib.starlette under `uvicorn --workers 2`: each fire runs once, shutdown is clean.

Real processes (uvicorn's master and two worker processes, each running the asyncio
host in the FastAPI app's lifespan) and a real etcd. The evidence comes from
outside the code under test:

* the task's own log, stamped with the kernel's monotonic clock by the bodies: no
  fire instant appears twice, and no two runs overlap;
* the process: SIGTERM or SIGINT to uvicorn's master ends it with exit status 0,
  both workers' lifespans report their shutdown, and nothing printed a traceback;
* a second etcd client: the task lock is free right after the exit, although its
  lease has a 30 s TTL, so the host released it rather than let it expire.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from firefly_scheduling.testing.local_server import free_local_port
from firefly_scheduling_etcd import EtcdLock

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import lock_is_free

pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")

pytestmark = pytest.mark.slow

HOST_APPS = Path(__file__).resolve().parent / "host_apps"
FIRES = 6


def _wait_for_lines(
    path: Path, lines: int, timeout: float, process: subprocess.Popen[bytes]
) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_two_uvicorn_workers_run_each_fire_once_and_stop_cleanly(
    tmp_path: Path, etcd_url: str, stop: signal.Signals
) -> None:
    lock_name = f"fastapi-beat-{uuid.uuid4().hex}"
    log, started = tmp_path / "runs.log", tmp_path / "lifespans.log"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FIREFLY_SCHEDULING_", "FIREFLY_SCAN_", "FIREFLY_HOSTAPP_"))
    }
    env.update(
        FIREFLY_SCHEDULING_MANIFEST=str(tmp_path / "no-manifest.json"),
        FIREFLY_HOSTAPP_ETCD_URL=etcd_url,
        FIREFLY_HOSTAPP_LOCK=lock_name,
        FIREFLY_HOSTAPP_LOG=str(log),
        FIREFLY_HOSTAPP_STARTED=str(started),
        FIREFLY_HOSTAPP_BODY="0.6",
        PYTHONPATH=str(HOST_APPS),
        PYTHONUNBUFFERED="1",
    )
    output = tmp_path / "uvicorn.out"
    with output.open("wb") as sink:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "firefly_hostapps.fastapi_app:app",
                "--workers",
                "2",
                "--port",
                str(free_local_port()),
                "--app-dir",
                str(HOST_APPS),
            ],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    try:
        assert _wait_for_lines(started, 2, 60, server), output.read_text()
        assert _wait_for_lines(log, FIRES, 60, server), output.read_text()
        server.send_signal(stop)
        status = server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    text = output.read_text(errors="replace")
    assert status == 0, text
    assert "Traceback" not in text, text
    assert "ERROR" not in text, text

    # Two workers, each ran the host and stopped it through its lifespan.
    lifespans = [line.split() for line in started.read_text().splitlines()]
    workers = {pid for pid, _ in lifespans}
    assert len(workers) == 2, lifespans
    assert Counter(event for _, event in lifespans) == {"started": 2, "stopped": 2}

    # Each fire ran once, on one worker, and no two runs overlapped (kernel clock).
    runs = [line.split() for line in log.read_text().splitlines()]
    assert len(runs) >= FIRES
    assert {pid for pid, *_ in runs} <= workers
    instants = Counter(instant for _, instant, _, _ in runs)
    assert all(count == 1 for count in instants.values()), instants
    spans = sorted((float(start), float(end)) for _, _, start, end in runs)
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans))

    # A second client takes the task lock at once: the host released it.
    assert lock_is_free(EtcdLock(etcd_url), lock_name)
