"""A FastAPI app with one `async def` task, for `uvicorn --workers 2` (test_starlette_uvicorn).

The task appends `pid instant start end` to `FIREFLY_HOSTAPP_LOG`, start and end read
from `time.monotonic()` (CLOCK_MONOTONIC: the kernel's clock, one for every process
of the machine), with one `O_APPEND` write per run. The app's own lifespan wraps
`scheduled_tasks` and writes `pid started` / `pid stopped` to
`FIREFLY_HOSTAPP_STARTED`, so the test knows every worker ran the host.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from firefly_scheduling import current_fire, scan, scheduled
from firefly_scheduling.contrib.starlette import scheduled_tasks
from firefly_scheduling_etcd import AsyncEtcdLock


def _append(variable: str, line: str) -> None:
    fd = os.open(os.environ[variable], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@scheduled(fixed_rate="1s", lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "fastapi-beat"))
async def beat() -> None:
    start = time.monotonic()
    await asyncio.sleep(float(os.environ.get("FIREFLY_HOSTAPP_BODY", "0.5")))
    fire = current_fire()
    assert fire is not None
    _append(
        "FIREFLY_HOSTAPP_LOG",
        f"{os.getpid()} {fire.instant.isoformat()} {start:.6f} {time.monotonic():.6f}\n",
    )


def _etcd_lock() -> AsyncEtcdLock:
    # Built on the worker's own loop, at startup.
    return AsyncEtcdLock(os.environ["FIREFLY_HOSTAPP_ETCD_URL"])


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    tasks = scan([__name__])  # this module's tasks: `beat`
    async with scheduled_tasks(lock=_etcd_lock, descriptors=tasks, grace_period=10.0):
        _append("FIREFLY_HOSTAPP_STARTED", f"{os.getpid()} started\n")
        yield
    _append("FIREFLY_HOSTAPP_STARTED", f"{os.getpid()} stopped\n")


app = FastAPI(lifespan=lifespan)


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}
