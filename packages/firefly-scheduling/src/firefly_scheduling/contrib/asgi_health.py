"""`/livez` and `/readyz` for the asyncio host, as a plain ASGI application.

    health = SchedulingHealth()
    app = FastAPI(lifespan=scheduling_lifespan(lock=..., health=health))
    app.mount("/scheduling", health)      # GET /scheduling/livez, /scheduling/readyz

The answers are those of `run --health-port` (`hosts.observation.health`): `/livez` says the
application's event loop woke on time (a heartbeat task beats on it), `/readyz`
that the lock backend and the run history answer now, with the last backend error
a fire met. Before the lifespan started, and after it stopped, both answer 503.
Nothing here imports a framework: any ASGI server or framework can mount it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from firefly_scheduling.hosts.observation.health import (
    HEARTBEAT_SECONDS,
    PROBE_CACHE_SECONDS,
    PROBE_HISTORY_TASK,
    PROBE_LOCK_TTL_SECONDS,
    Heartbeat,
    HostHealth,
    LastBackendError,
    Probe,
    error_text,
    probe,
    probe_lock_name,
)
from firefly_scheduling.hosts.runtime.asyncio_runtime import AsyncTaskRuntime

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class SchedulingHealth:
    """An ASGI app answering `/livez` and `/readyz` for the host the lifespan runs."""

    def __init__(self) -> None:
        self._health: HostHealth | None = None
        self._runtime: AsyncTaskRuntime | None = None
        self._beating: asyncio.Task[None] | None = None
        self._cached: tuple[float, Probe, Probe | None] | None = None
        self._probing = asyncio.Lock()

    # -- the lifespan's side ------------------------------------------------------

    def attach(self, runtime: AsyncTaskRuntime) -> None:
        """Start answering for `runtime`'s host; beat on the running loop from now on."""
        heartbeat = Heartbeat()
        last_error = LastBackendError()
        runtime.observers = (*runtime.observers, last_error)
        self._runtime = runtime
        self._health = HostHealth(
            heartbeat,
            probe_lock=_unused,
            probe_history=None,
            stopping=lambda: not runtime.accepting,
            last_error=last_error,
        )
        self._beating = asyncio.get_running_loop().create_task(_beat(heartbeat))

    async def detach(self) -> None:
        """Stop answering: the host stopped."""
        self._health = self._runtime = None
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beating
            self._beating = None

    # -- ASGI ------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        route = str(scope.get("path", "")).rstrip("/").rsplit("/", 1)[-1]
        status, body = await self.answer(route)
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def answer(self, route: str) -> tuple[int, dict[str, object]]:
        """The status and body of `livez` or `readyz`."""
        health, runtime = self._health, self._runtime
        if route not in ("livez", "readyz"):
            return 404, {"error": f"unknown path {route!r}; try livez or readyz"}
        if health is None or runtime is None:
            return 503, {"status": "not started"}
        if route == "livez":
            return health.livez()
        if not runtime.accepting:
            return health.readyz()  # "stopping", without a probe
        lock, history = await self._probes(runtime)
        return health.ready_answer(lock, history)

    async def _probes(self, runtime: AsyncTaskRuntime) -> tuple[Probe, Probe | None]:
        async with self._probing:
            cached = self._cached
            if cached is not None and time.monotonic() - cached[0] < PROBE_CACHE_SECONDS:
                return cached[1], cached[2]
            lock = await _probe_lock(runtime)
            history_store = runtime.fire_runner.get().history
            history = None
            if history_store is not None:
                read = history_store.runs

                def read_history() -> None:
                    read(PROBE_HISTORY_TASK, 1, lock=PROBE_HISTORY_TASK)

                history = await asyncio.to_thread(probe, read_history)
            self._cached = (time.monotonic(), lock, history)
            return lock, history


async def _beat(heartbeat: Heartbeat) -> None:
    while True:
        heartbeat.beat()
        await asyncio.sleep(HEARTBEAT_SECONDS)


async def _probe_lock(runtime: AsyncTaskRuntime) -> Probe:
    name = probe_lock_name(runtime.node)
    try:
        lock = runtime.lock.get()
        if await lock.try_acquire(name, PROBE_LOCK_TTL_SECONDS):
            await lock.release(name)
    except Exception as err:  # noqa: BLE001  # a probe reports any failure, never raises
        return Probe(False, error_text(err))
    return Probe(True)


def _unused() -> None:
    """The asyncio host probes its lock on the loop (`_probe_lock`), never through here."""
    raise NotImplementedError
