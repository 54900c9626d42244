"""`tick`'s exit status and `--json` rows tell the truth, SIGTERM or not.

A real `tick` process: one task fails every second, another runs long. SIGTERM with
a short grace period abandons the long run; the process must still exit 1 (a body
failed), and `--json` must list every fire it touched, the abandoned run included,
each row that did not succeed with its error. A claim that met a backend error has
its error text in its row, never null and never the URL's password.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import node_env, start_node, wait_for_early_minute

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.tick import TickHost
from firefly_scheduling_redis import RedisLock

pytestmark = pytest.mark.slow


def test_sigterm_after_a_failed_body_exits_1_and_lists_the_abandoned_run(
    tmp_path: Path,
) -> None:
    started, failed = tmp_path / "started", tmp_path / "failed"
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="memory",
        FIREFLY_HOSTAPP_STARTED=str(started),
        FIREFLY_HOSTAPP_FAILED=str(failed),
        FIREFLY_HOSTAPP_BODY="20",
    )
    wait_for_early_minute()
    node = start_node(
        "tick",
        "tick-failing",
        app="firefly_hostapps.tick_failing",
        env=env,
        workdir=tmp_path,
        args=("--grace-period", "0.5", "--json", "--log-level", "ERROR"),
    )
    deadline = time.monotonic() + 30
    while not (started.exists() and failed.exists()) and time.monotonic() < deadline:
        if node.process.poll() is not None:
            break
        time.sleep(0.02)
    assert started.exists(), node.text()
    assert failed.exists(), node.text()
    time.sleep(0.3)  # the failed fire is over and reported to the pass
    node.terminate()
    status = node.wait(timeout=20)
    output = node.text()
    rows = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert status == 1, output
    failures = [r for r in rows if r["verdict"] == "failed"]
    assert failures, output
    assert all("the report server refused the upload" in (r["error"] or "") for r in failures)
    [abandoned] = [r for r in rows if r["verdict"] == "abandoned"]
    assert abandoned["target"] == "firefly_hostapps.tick_failing:runs_long"
    assert "grace period" in abandoned["error"]
    not_run = [r for r in rows if r["verdict"] not in ("succeeded", "claimed_elsewhere")]
    assert all(r["error"] for r in not_run), not_run


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_backend_error_rows_carry_the_error_without_the_password() -> None:
    url = f"redis://:hunter2-secret@127.0.0.1:{_closed_port()}/0?socket_connect_timeout=0.5"
    descriptors = [
        ScheduledDescriptor(
            target="firefly_hostapps.tick_failing:fails_fast",
            cron="* * * * *",
            lock_name="hostapps-tick-backend-error",
            lock_ttl=30.0,
        )
    ]
    runtime = build_runtime(
        descriptors,
        Settings(history_url="off"),
        host="tick",
        lock=RedisLock(url),
        node="tick-backend-error",
        eager=False,  # no boot probe: the backend is lost after boot, as in a real outage
    )
    try:
        report = TickHost(descriptors, runtime, grace_period=1.0).run()
    finally:
        runtime.close()
    rows = [row for row in report.rows() if row["verdict"] == "backend_error"]
    assert rows, report.rows()
    for row in rows:
        assert row["error"], row
        assert "hunter2-secret" not in json.dumps(row)
    assert report.exit_status == 1
