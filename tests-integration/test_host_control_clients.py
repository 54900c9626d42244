"""A host opens one control-store client: its fire runner reads the pauses through it.

`run` boots its runtime and the control store it steers from (`HostOptions.boot`).
The fire path reads the pauses before every run starts; the steering threads read
the triggers and backfills. Both must go through the same client, so the host holds
one pool of connections to the control store, not one per reader. Counted on the
real server: the control URL names its connections (`client_name`), a second client
lists them (`CLIENT LIST`) after a fire and a steering read made one after the other,
which one client serves on one connection.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from firefly_scheduling.cli.host_options import HostOptions
from firefly_scheduling.fires.outcome import Fire, Verdict

HOST_APPS = Path(__file__).resolve().parent / "host_apps"
REPORT = "firefly_hostapps.steered:report"


def _named(url: str, name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}client_name={name}"


def _connections_named(url: str, name: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return sum(1 for entry in client.client_list() if entry.get("name") == name)
    finally:
        client.close()


def test_the_fire_path_and_the_steering_share_one_control_store_client(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    name = f"control-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_PROVIDER", "redis")
    monkeypatch.setenv("FIREFLY_SCHEDULING_LOCK_REDIS_URL", redis_url)
    monkeypatch.setenv("FIREFLY_SCHEDULING_CONTROL_URL", _named(redis_url, name))
    monkeypatch.setenv("FIREFLY_SCHEDULING_HISTORY_URL", "off")
    monkeypatch.setenv("FIREFLY_SCHEDULING_MANIFEST", str(tmp_path / "no-manifest.json"))
    monkeypatch.setenv("FIREFLY_HOSTAPP_LOCK", f"control-clients-{uuid.uuid4().hex}")
    options = HostOptions(
        apps=("firefly_hostapps.steered",),
        manifest=None,
        paths=(HOST_APPS,),
        lock_provider=None,
        node="control-clients",
        fire_log=None,
        grace_period=1.0,
        max_workers=None,
        wait_for_backend=10.0,
        log_level="WARNING",
        log_format="text",
    )
    runtime, descriptors, control = options.boot("run")
    try:
        assert control is not None
        [report] = [task for task in descriptors if task.target == REPORT]
        ran = runtime.fire_runner.get().run(
            Fire.at(report, datetime.now(UTC).replace(microsecond=0)), lambda: None
        )
        assert ran.verdict is Verdict.SUCCEEDED  # its pauses were read first
        assert control.triggers(REPORT) == []  # what the steering thread reads
        assert _connections_named(redis_url, name) == 1
    finally:
        runtime.close()
        if control is not None:
            control.close()
