"""contrib.starlette in-process: the lifespan runs the tasks on the app's loop and stops them.

Starlette's TestClient runs the app (and its lifespan) on an event loop of its own;
the task records that loop, so the test can tell it ran there and not on a loop of
the host's. The multi-process proof (uvicorn workers, a real etcd) is
tests-integration/test_starlette_uvicorn.py.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("starlette")
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_async_unit_tasks as atasks

from firefly_scheduling import ConfigurationError, InMemoryLock, ScheduledDescriptor, Settings
from firefly_scheduling.aio import AsyncInMemoryLock
from firefly_scheduling.contrib.starlette import scheduling_lifespan


async def loop_id(request: Request) -> JSONResponse:
    del request
    return JSONResponse({"loop": id(asyncio.get_running_loop())})


def test_the_lifespan_runs_async_tasks_on_the_app_loop_and_frees_the_lock_at_shutdown() -> None:
    atasks.reset()
    lock_name = f"starlette-{uuid.uuid4().hex[:8]}"
    task = ScheduledDescriptor(
        target="firefly_async_unit_tasks:tock", fixed_rate=0.2, lock_name=lock_name, lock_ttl=30
    )
    app = Starlette(
        routes=[Route("/loop", loop_id)],
        lifespan=scheduling_lifespan(
            lock=AsyncInMemoryLock, descriptors=[task], settings=Settings(lock_provider="none")
        ),
    )
    with TestClient(app) as client:
        deadline = time.monotonic() + 10
        while len(atasks.calls("tock")) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        app_loop = client.get("/loop").json()["loop"]
    calls = atasks.calls("tock")
    assert len(calls) >= 3
    assert {call[2] for call in calls} == {app_loop}
    assert {call[1] for call in calls} == {"firefly_async_unit_tasks:tock"}
    # the lifespan's shutdown released the task lock: another node may take it now
    assert InMemoryLock().try_acquire(lock_name, 1.0)


def test_a_synchronous_lock_fails_the_startup_naming_it() -> None:
    task = ScheduledDescriptor(target="firefly_async_unit_tasks:tock", fixed_rate=1.0)
    app = Starlette(
        lifespan=scheduling_lifespan(
            lock=InMemoryLock(),  # type: ignore[arg-type]  # the mistake under test
            descriptors=[task],
            settings=Settings(lock_provider="none"),
        )
    )
    with pytest.raises(ConfigurationError, match="InMemoryLock"), TestClient(app):
        pass
