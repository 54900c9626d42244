"""`firefly_scheduling.contrib.django` in a minimal Django project, run as Django runs it.

Every check drives `manage.py` in a child process, as an operator would: settings
come from Django's `FIREFLY_SCHEDULING`, tasks from the app's `tasks.py`, bodies
write a log the test reads, and the run history is read back through the admin.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("django")
pytest.importorskip("firefly_scheduling_database")

PROJECT = Path(__file__).resolve().parent / "django_project"
TIMEOUT = 60


@pytest.fixture
def scratch(tmp_path: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FIREFLY_SCHEDULING_", "FIREFLY_SCAN"))
    }
    env.update(
        FIREFLY_DJANGO_TEST_DIR=str(tmp_path),
        FIREFLY_DJANGO_TEST_LOG=str(tmp_path / "bodies.log"),
        DJANGO_SETTINGS_MODULE="shop_site.settings",
        PYTHONPATH=str(PROJECT),
    )
    migrate = subprocess.run(
        [
            sys.executable,
            "-m",
            "firefly_scheduling.cli",
            "migrate",
            "--url",
            f"sqlite:///{tmp_path / 'locks.db'}",
        ],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stderr + migrate.stdout
    return env


def manage(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *arguments],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def bodies(env: dict[str, str]) -> list[str]:
    path = Path(env["FIREFLY_DJANGO_TEST_LOG"])
    return path.read_text().splitlines() if path.exists() else []


def test_firefly_schedule_lists_the_tasks_of_each_apps_tasks_py(scratch: dict[str, str]) -> None:
    done = manage(scratch, "firefly_schedule", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["target"] for row in rows] == ["shop.tasks:nightly_reconcile"]
    assert rows[0]["cron"] == "* * * * *"


def test_firefly_tick_runs_the_due_task_once_and_the_admin_shows_the_run(
    scratch: dict[str, str],
) -> None:
    done = manage(scratch, "firefly_tick")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "1 succeeded" in done.stdout
    # Settings came from Django: the database provider, named in the startup line.
    assert "lock provider 'database'" in done.stderr
    assert [line.split()[2] for line in bodies(scratch)] == ["nightly_reconcile"]
    again = manage(scratch, "firefly_tick")  # another process, maybe the same minute
    assert again.returncode == 0, again.stderr
    same_minute = done.stdout.split(":")[0:2] == again.stdout.split(":")[0:2]
    # One body per fire: a second pass in the same minute finds the fire claimed.
    assert len(bodies(scratch)) == (1 if same_minute else 2), again.stdout

    admin = check_admin(scratch)
    assert admin.returncode == 0, admin.stderr
    assert "LIST 200" in admin.stdout
    assert "shop.tasks:nightly_reconcile" in admin.stdout
    assert "django-node" in admin.stdout
    assert "succeeded" in admin.stdout
    assert "ADD 403" in admin.stdout  # read-only: no add page
    assert "INDEX 0" not in admin.stdout  # the index links the runs page


def test_the_admin_shows_a_timed_out_run_with_its_error(
    scratch: dict[str, str], timed_out_run: Callable[[str, str, datetime], None]
) -> None:
    locks = Path(scratch["FIREFLY_DJANGO_TEST_DIR"]) / "locks.db"
    timed_out_run(f"sqlite:///{locks}", "shop.tasks:slow", datetime(2030, 1, 1, tzinfo=UTC))
    admin = check_admin(scratch)
    assert admin.returncode == 0, admin.stderr
    assert '<tr class="firefly-run firefly-timed_out">' in admin.stdout
    assert "<td>timed_out</td>" in admin.stdout
    assert "<td>timed out after 30s</td>" in admin.stdout


def test_the_admin_shows_a_caught_up_run_with_its_reason(
    scratch: dict[str, str], caught_up_run: Callable[[str, str, datetime], None]
) -> None:
    locks = Path(scratch["FIREFLY_DJANGO_TEST_DIR"]) / "locks.db"
    caught_up_run(f"sqlite:///{locks}", "shop.tasks:late", datetime(2030, 1, 1, tzinfo=UTC))
    admin = check_admin(scratch)
    assert admin.returncode == 0, admin.stderr
    assert '<tr class="firefly-run firefly-caught_up">' in admin.stdout
    assert "<td>caught_up</td>" in admin.stdout
    assert "<td>caught up: missed while the fleet was down" in admin.stdout


def test_firefly_run_runs_until_sigterm_and_exits_0(scratch: dict[str, str]) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        health_port = int(free.getsockname()[1])
    process = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "firefly_run",
            "--app",
            "shop.fast_tasks",
            "--health-port",
            str(health_port),
            "--health-host",
            "127.0.0.1",
        ],
        env=scratch,
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while len(bodies(scratch)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(bodies(scratch)) >= 2
        livez = f"http://127.0.0.1:{health_port}/livez"
        with urllib.request.urlopen(livez, timeout=5) as answer:  # loopback
            assert answer.status == 200
            assert json.loads(answer.read())["status"] == "alive"
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, stderr
    assert {line.split()[2] for line in bodies(scratch)} == {"heartbeat"}
    assert "Traceback" not in stderr


def test_an_unknown_setting_key_is_refused_naming_it(
    scratch: dict[str, str], tmp_path: Path
) -> None:
    settings = tmp_path / "bad_settings.py"
    settings.write_text(
        "from shop_site.settings import *\nFIREFLY_SCHEDULING = {'LOCK_PROVDER': 'redis'}\n"
    )
    env = {
        **scratch,
        "DJANGO_SETTINGS_MODULE": "bad_settings",
        "PYTHONPATH": f"{PROJECT}{os.pathsep}{tmp_path}",
    }
    done = manage(env, "firefly_tick")
    assert done.returncode != 0  # Django's own start-up refuses it, before any command
    assert "LOCK_PROVDER" in done.stderr
    assert "did you mean 'LOCK_PROVIDER'" in done.stderr


def test_lock_required_refuses_a_lock_that_excludes_nothing(scratch: dict[str, str]) -> None:
    done = manage({**scratch, "FIREFLY_DJANGO_TEST_PROVIDER": "memory"}, "firefly_tick")
    assert done.returncode == 2, done.stderr + done.stdout
    assert "FIREFLY_SCHEDULING_LOCK_REQUIRED" in done.stderr + done.stdout
    assert bodies(scratch) == []


def test_the_admin_shows_which_retry_a_run_was(scratch: dict[str, str]) -> None:
    """A fire failed, then its retry succeeded: written by the fire runner itself."""
    pytest.importorskip("firefly_scheduling_database")
    from firefly_scheduling.fires.outcome import Fire  # noqa: PLC0415 - after the skip
    from firefly_scheduling.fires.runner import FireRunner  # noqa: PLC0415
    from firefly_scheduling.locks import InMemoryLock  # noqa: PLC0415
    from firefly_scheduling.tasks.descriptor import ScheduledDescriptor  # noqa: PLC0415
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    locks = Path(scratch["FIREFLY_DJANGO_TEST_DIR"]) / "locks.db"
    history = SqlRunHistory(f"sqlite:///{locks}")
    history.install()
    target = "shop.tasks:flaky"
    task = ScheduledDescriptor(
        target=target,
        lock_name=target,
        lock_ttl=30.0,
        cron="0 * * * *",
        retries=2,
        retry_backoff=1.0,
        retry_backoff_max=1.0,
    )
    instant = datetime(2030, 1, 1, tzinfo=UTC)
    now = [instant]
    runner = FireRunner(InMemoryLock(), history=history, clock=lambda: now[0])
    runs: list[int] = []

    def body() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("the first run fails")

    try:
        failed = runner.run(Fire.at(task, instant), body)
        assert failed.retry is not None
        now[0] = failed.retry.due
        assert runner.run(failed.retry, body).verdict.value == "succeeded"
    finally:
        runner.close()
        history.close()
    admin = check_admin(scratch)
    assert admin.returncode == 0, admin.stderr
    assert "<td>retry 1 of 2</td>" in admin.stdout


def check_admin(scratch: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The project's admin pages, fetched by its `check_admin.py` in a process of its own."""
    return subprocess.run(
        [sys.executable, "check_admin.py"],
        env=scratch,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_the_admin_shows_a_buffered_fire_with_why_it_waits(scratch: dict[str, str]) -> None:
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    at = datetime(2030, 1, 1, tzinfo=UTC)
    history = SqlRunHistory(f"sqlite:///{Path(scratch['FIREFLY_DJANGO_TEST_DIR']) / 'locks.db'}")
    try:
        history.install()
        reason = "buffered: it waits for the earlier run"
        assert history.buffer(
            "shop.tasks:slow", at, lock="shop.tasks:slow", node="n2", reason=reason, at=at
        )
    finally:
        history.close()
    admin = check_admin(scratch)
    assert admin.returncode == 0, admin.stderr
    assert '<tr class="firefly-run firefly-buffered">' in admin.stdout
    assert "<td>buffered</td>" in admin.stdout
    assert "<td>buffered: it waits for the earlier run</td>" in admin.stdout


def test_the_admin_shows_a_cancelled_run_with_why(scratch: dict[str, str]) -> None:
    from firefly_scheduling.history import RunState  # noqa: PLC0415
    from firefly_scheduling_database.sql_history.store import SqlRunHistory  # noqa: PLC0415

    at = datetime(2030, 1, 1, tzinfo=UTC)
    target = "shop.tasks:slow"
    history = SqlRunHistory(f"sqlite:///{Path(scratch['FIREFLY_DJANGO_TEST_DIR']) / 'locks.db'}")
    try:
        history.install()
        history.start(target, at, lock=target, node="n1", token=3, at=at)
        assert history.finish(
            target, at, lock=target, token=3, state=RunState.CANCELLED, error="asked", at=at
        )
    finally:
        history.close()
    admin = check_admin(scratch)
    assert admin.returncode == 0, admin.stderr
    assert '<tr class="firefly-run firefly-cancelled">' in admin.stdout
    assert "<td>cancelled</td>" in admin.stdout
