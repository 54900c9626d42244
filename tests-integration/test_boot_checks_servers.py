"""Boot checks and backend visibility against real servers, with real node processes.

* A lock backend that does not answer at boot: every provider's `tick` retries it
  for `--wait-for-backend` seconds, then exits 3 naming the option; a backend that
  comes back within the wait (a proxy dropping everything, then not) lets `run` boot.
* Once running, a backend that stops answering is said once, at ERROR, with how
  long it stayed down when it answers again, not only by one warning per fire.
* `monitor` sees an unreachable backend on every provider, those without a run
  history (Redis, etcd, memcached) included.
* A run-history table this role cannot create is refused at boot (exit 2, naming
  the table and `firefly-scheduling migrate --history`).

Evidence is what the processes did: their exit status, their own log, and the runs
their task bodies recorded in a file.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_apps"))
from firefly_hostapps.harness import HOST_APPS, node_env, read_runs, start_node

from chaos_harness.proxy import FaultyProxy

pytestmark = pytest.mark.slow

#: Provider -> the fixture naming its server's URL.
PROVIDERS = {
    "redis": "redis_url",
    "redis-cluster": "redis_cluster_url",
    "memcached": "memcached_url",
    "etcd": "etcd_url",
    "postgres": "postgres_url",
    "mysql": "mysql_url",
    "database": "postgres_url",
}


#: `monitor`'s arguments: the one-task app of the host tests.
MONITORED = ("--app", "firefly_hostapps.minutely", "--path", str(HOST_APPS))


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def with_port(url: str, port: int) -> str:
    """`url` pointing at 127.0.0.1:`port`, its credentials, path and query kept."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def provider_env(provider: str, url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    name = "redis" if provider == "redis-cluster" else provider
    return node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER=name,
        **{f"FIREFLY_SCHEDULING_LOCK_{name.upper()}_URL": url},
        FIREFLY_HOSTAPP_LOG=str(tmp_path / "runs.log"),
        **extra,
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_backend_that_never_answers_makes_tick_exit_3_after_the_wait(
    provider: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = with_port(request.getfixturevalue(PROVIDERS[provider]), closed_port())
    started = time.monotonic()
    node = start_node(
        "tick",
        "silent",
        app="firefly_hostapps.minutely",
        env=provider_env(provider, url, tmp_path),
        workdir=tmp_path,
        args=("--wait-for-backend", "2"),
    )
    status = node.wait(timeout=60)
    elapsed = time.monotonic() - started
    output = node.text()
    assert status == 3, output
    assert "did not answer within 2s" in output
    assert "--wait-for-backend" in output
    assert "does not answer yet" in output  # it was retried, not refused at once
    assert elapsed < 30, output  # the wait, one attempt's timeouts and the start-up
    assert read_runs(tmp_path / "runs.log") == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_backend_answers_the_boot_probe_and_tick_runs(
    provider: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(PROVIDERS[provider])
    if provider == "database":
        migrate = subprocess.run(
            [sys.executable, "-m", "firefly_scheduling", "migrate", "--url", url],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    node = start_node(
        "tick",
        f"probed-{provider}",
        app="firefly_hostapps.minutely",
        env=provider_env(provider, url, tmp_path, FIREFLY_SCHEDULING_HISTORY_URL="off"),
        workdir=tmp_path,
        args=("--wait-for-backend", "0"),
    )
    status = node.wait(timeout=90)
    output = node.text()
    assert status == 0, output
    assert "does not answer" not in output
    # The fire of this minute: run here, or already by another test's node this minute.
    assert len(read_runs(tmp_path / "runs.log")) <= 1, output


def test_a_backend_that_answers_within_the_wait_lets_run_boot(
    tmp_path: Path, redis_url: str
) -> None:
    server = urlsplit(redis_url)
    proxy = FaultyProxy(server.hostname or "127.0.0.1", server.port or 6379).start()
    try:
        proxy.blackhole(120.0)  # every request dropped: the server "is not up yet"
        env = provider_env("redis", with_port(redis_url, proxy.port), tmp_path)
        node = start_node(
            "run",
            "patient",
            app="firefly_hostapps.backend_watch",
            env=env,
            workdir=tmp_path,
            args=("--wait-for-backend", "30"),
        )
        try:
            # The server comes up only once the node has said it waits for it, however
            # slowly the node started.
            node.wait_for_output("does not answer yet", timeout=45)
            proxy.blackhole(0.0)
            deadline = time.monotonic() + 45
            while not read_runs(tmp_path / "runs.log") and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            status = node.stop()
        output = node.text()
        assert status == 0, output
        assert read_runs(tmp_path / "runs.log"), output
        assert "does not answer yet" in output
        assert "the lock backend answers" in output
    finally:
        proxy.close()


def test_a_backend_lost_after_boot_is_said_once_and_its_return_too(
    tmp_path: Path, redis_url: str
) -> None:
    server = urlsplit(redis_url)
    proxy = FaultyProxy(server.hostname or "127.0.0.1", server.port or 6379).start()
    log = tmp_path / "runs.log"
    try:
        env = provider_env("redis", with_port(redis_url, proxy.port), tmp_path)
        node = start_node(
            "run", "watched", app="firefly_hostapps.backend_watch", env=env, workdir=tmp_path
        )
        try:
            deadline = time.monotonic() + 30
            while not read_runs(log) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert read_runs(log), node.text()
            proxy.blackhole(8.0)
            time.sleep(9.0)
            before = len(read_runs(log))
            deadline = time.monotonic() + 20
            while len(read_runs(log)) <= before and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            status = node.stop()
        output = node.text()
        assert status == 0, output
        assert len(read_runs(log)) > before, output  # it ran again once the backend did
        lost = [line for line in output.splitlines() if "lock backend stopped answering" in line]
        back = [line for line in output.splitlines() if "lock backend answers again" in line]
        assert len(lost) == 1, output
        assert " ERROR " in lost[0]
        assert len(back) == 1, output
        assert "fire(s) skipped" in back[0]
    finally:
        proxy.close()


@pytest.mark.parametrize("provider", ["redis", "etcd", "memcached", "postgres"])
def test_monitor_reports_an_unreachable_backend(
    provider: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = with_port(request.getfixturevalue(PROVIDERS[provider]), closed_port())
    done = subprocess.run(
        [sys.executable, "-m", "firefly_scheduling.cli", "monitor", *MONITORED],
        env=provider_env(provider, url, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "FAIL lock backend" in output
    assert f"127.0.0.1:{urlsplit(url).port}" in output


def test_a_history_table_this_role_cannot_create_is_refused_at_boot(
    tmp_path: Path, postgres_schema_url: str
) -> None:
    # A fresh schema, and sessions that may read but never write: CREATE TABLE fails.
    read_only = postgres_schema_url.replace(
        "options=", "options=-c%20default_transaction_read_only%3Don%20", 1
    )
    env = node_env(
        tmp_path,
        FIREFLY_SCHEDULING_LOCK_PROVIDER="memory",
        FIREFLY_SCHEDULING_HISTORY_URL=read_only,
        FIREFLY_HOSTAPP_LOG=str(tmp_path / "runs.log"),
    )
    node = start_node("tick", "history", app="firefly_hostapps.minutely", env=env, workdir=tmp_path)
    status = node.wait(timeout=90)
    output = node.text()
    assert status == 2, output
    assert "firefly_scheduling_runs" in output
    assert "firefly-scheduling migrate --history" in output
    assert read_runs(tmp_path / "runs.log") == []
