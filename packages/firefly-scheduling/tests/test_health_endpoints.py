"""The health checks' rules, and the asyncio host's endpoints mounted in a Starlette app.

The threaded host's endpoints over real HTTP, with a backend that goes away, are in
tests-integration/test_hosts_health_endpoints.py.
"""

from __future__ import annotations

import time
import uuid

import pytest

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.hosts.observation.health import (
    Heartbeat,
    HostHealth,
    LastBackendError,
    probe,
)

pytest.importorskip("starlette")
from starlette.applications import Starlette
from starlette.testclient import TestClient

from firefly_scheduling.contrib.starlette import SchedulingHealth, scheduling_lifespan


def test_a_loop_that_stops_beating_is_reported_stalled() -> None:
    heartbeat = Heartbeat(stall_seconds=0.2)
    heartbeat.beat()
    assert heartbeat.check()[0]
    time.sleep(0.3)
    alive, detail = heartbeat.check()
    assert not alive
    assert detail["beats"] == 1


def test_readiness_reports_the_backend_error_and_liveness_does_not_care() -> None:
    def down() -> None:
        raise LockBackendError("redis lock backend redis://:***@cache:6379/0 failed: refused")

    health = HostHealth(
        Heartbeat(),
        probe_lock=down,
        probe_history=None,
        stopping=lambda: False,
        last_error=LastBackendError(),
    )
    status, body = health.readyz()
    assert status == 503
    assert body["lock"] == {
        "ok": False,
        "error": "LockBackendError: redis lock backend redis://:***@cache:6379/0 failed: refused",
    }
    assert health.livez()[0] == 200


def test_a_foreign_exception_is_reported_by_its_type_alone() -> None:
    def leaky() -> None:
        raise OSError("connect to postgresql://app:hunter2@db failed")

    answer = probe(leaky)
    assert not answer.ok
    assert answer.error is not None
    assert "hunter2" not in answer.error


def test_the_asyncio_host_serves_livez_and_readyz_through_the_lifespan() -> None:
    task = ScheduledDescriptor(
        target="firefly_async_unit_tasks:tock",
        fixed_rate=0.2,
        lock_name=f"health-{uuid.uuid4().hex[:8]}",
        lock_ttl=30,
    )
    health = SchedulingHealth()
    app = Starlette(
        lifespan=scheduling_lifespan(
            lock=AsyncInMemoryLock,
            descriptors=[task],
            settings=Settings(lock_provider="none", history_url="memory://"),
            health=health,
        ),
    )
    app.mount("/scheduling", health)
    with TestClient(app) as client:
        deadline = time.monotonic() + 5
        live = client.get("/scheduling/livez")
        while live.json().get("beats", 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            live = client.get("/scheduling/livez")
        assert live.status_code == 200
        assert live.json()["status"] == "alive"
        ready = client.get("/scheduling/readyz")
        assert ready.status_code == 200, ready.json()
        assert ready.json()["lock"] == {"ok": True, "error": None}
        assert ready.json()["history"] == {"ok": True, "error": None}
        assert client.get("/scheduling/elsewhere").status_code == 404
    after = TestClient(app).get("/scheduling/readyz")  # the lifespan has stopped
    assert after.status_code == 503
