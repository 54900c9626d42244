"""Starlette and FastAPI: run the `@scheduled` tasks on the application's own event loop.

    from fastapi import FastAPI
    from firefly_scheduling.contrib.starlette import scheduling_lifespan
    from firefly_scheduling_etcd import AsyncEtcdLock

    app = FastAPI(lifespan=scheduling_lifespan(lock=AsyncEtcdLock(ETCD_URL)))

The lifespan starts the asyncio host (`hosts.asyncio_host`) at the application's
startup, on the loop the server runs it on, and stops it gracefully at shutdown:
no new fire starts, running fires get `grace_period` seconds, then the rest are
cancelled and the lock backend is closed. Under `uvicorn --workers N` every worker
process runs the host; the claims and the task lock make each fire run on one of
them (and on one node of the fleet), exactly as with `firefly-scheduling run`.

An application with a lifespan of its own enters `scheduled_tasks(...)` inside it:

    @asynccontextmanager
    async def lifespan(app):
        async with pool_started(), scheduled_tasks(lock=AsyncEtcdLock(ETCD_URL)):
            yield

Health endpoints for Kubernetes probes: pass a `SchedulingHealth` and mount it
(`firefly_scheduling.contrib.asgi_health`); it answers `livez` and `readyz` as
`run --health-port` does:

    health = SchedulingHealth()
    app = FastAPI(lifespan=scheduling_lifespan(lock=..., health=health))
    app.mount("/scheduling", health)

Install with `pip install 'firefly-scheduling[starlette]'`. Nothing here imports
Starlette at run time: a lifespan is a plain async context manager factory, so the
same helper fits FastAPI, Starlette and any framework that takes one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from firefly_scheduling.contrib.asgi_health import SchedulingHealth
from firefly_scheduling.hosts.asyncio_host import AsyncHost
from firefly_scheduling.hosts.observation.observers import FireObserver
from firefly_scheduling.hosts.runtime.asyncio_boot import (
    build_async_runtime,
    wait_for_async_backend,
)
from firefly_scheduling.hosts.runtime.boot import validated
from firefly_scheduling.hosts.runtime.shutdown import DEFAULT_GRACE_PERIOD_SECONDS
from firefly_scheduling.hosts.runtime.steering_store import async_steering_store
from firefly_scheduling.locks.port import AsyncDistributedLock
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.callables import Resolver
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.discovery import resolve_descriptors, runtime_targets

__all__ = ["SchedulingHealth", "scheduled_tasks", "scheduling_lifespan"]

#: A lock, or a factory (a class, a function) called on the application's loop at
#: startup, for a client that must be created on the loop it will run on.
LockSource = AsyncDistributedLock | Callable[[], AsyncDistributedLock]


@asynccontextmanager
async def scheduled_tasks(
    *,
    lock: LockSource | None = None,
    descriptors: Sequence[ScheduledDescriptor] | None = None,
    resolver: Resolver | None = None,
    settings: Settings | None = None,
    grace_period: float = DEFAULT_GRACE_PERIOD_SECONDS,
    observers: Sequence[FireObserver] = (),
    health: SchedulingHealth | None = None,
    wait_for_backend: float | None = None,
) -> AsyncIterator[AsyncHost]:
    """Run the tasks on the running loop while the block runs; yield the host.

    * `lock`: an `AsyncDistributedLock` (or a factory of one); by default the
      configured `firefly.scheduling.lock.provider`, resolved for asyncio. A
      synchronous lock is refused, naming it.
    * `descriptors`: the tasks; by default the compiled manifest, else a scan of
      `FIREFLY_SCAN_PACKAGES`.
    * `resolver(cls) -> instance` supplies the object a method task runs on.
    * `grace_period`: how long running fires may finish at shutdown.
    * `health`: a `SchedulingHealth` to answer `livez`/`readyz` for this host.
    * `wait_for_backend`: seconds to retry a lock backend that does not answer yet
      (default `firefly.scheduling.wait-for-backend`, 30 s), then `BackendUnavailable`.

    Schedules defined at runtime are read from the configured control store
    (`hosts.runtime.schedule_watch_async`); without one, a warning says so once.

    Everything is validated and built before the block is entered (a bad task, a
    method task whose class cannot be built, an unusable or silent backend fails the
    application's startup, naming the cause).
    """
    settings = Settings.from_env() if settings is None else settings
    if descriptors is None:
        descriptors = resolve_descriptors(settings).descriptors
    tasks = validated(descriptors)
    # One control store client per host: the fire runner reads the pauses from the
    # store the host steers from (built here, closed by the host's stop).
    control = async_steering_store(settings)
    try:
        runtime = build_async_runtime(
            tasks,
            settings,
            host="asyncio",
            lock=_built(lock),
            resolver=resolver,
            observers=observers,
            control=control,
        )
        seconds = settings.wait_for_backend if wait_for_backend is None else wait_for_backend
        await wait_for_async_backend(runtime, seconds=seconds)  # closes the runtime if not
    except BaseException:
        if control is not None:
            await control.aclose()
        raise
    try:
        allowed = None
        if control is not None:
            allowed = runtime_targets(settings) | {task.target for task in tasks}
    except BaseException:
        await runtime.aclose()
        if control is not None:
            await control.aclose()
        raise
    host = AsyncHost(
        tasks, runtime, grace_period=grace_period, control=control, runtime_targets=allowed
    )
    host.start()
    if health is not None:
        health.attach(runtime)
    try:
        yield host
    finally:
        try:
            await host.stop()
        finally:
            if health is not None:
                await health.detach()


def _built(lock: LockSource | None) -> object | None:
    """The lock itself, or what its factory (a class, a function) builds, on this loop."""
    # A class has the protocol's methods too, so it is told apart from an instance first.
    if isinstance(lock, type) or (callable(lock) and not isinstance(lock, AsyncDistributedLock)):
        return lock()
    return lock


def scheduling_lifespan(
    *,
    lock: LockSource | None = None,
    descriptors: Sequence[ScheduledDescriptor] | None = None,
    resolver: Resolver | None = None,
    settings: Settings | None = None,
    grace_period: float = DEFAULT_GRACE_PERIOD_SECONDS,
    observers: Sequence[FireObserver] = (),
    health: SchedulingHealth | None = None,
    wait_for_backend: float | None = None,
) -> Callable[[object], AbstractAsyncContextManager[None]]:
    """A lifespan for `FastAPI(lifespan=...)` or `Starlette(lifespan=...)`.

    The arguments are those of `scheduled_tasks`; nothing is built until the
    application starts, so creating the app stays free of I/O.
    """

    @asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        del app
        async with scheduled_tasks(
            lock=lock,
            descriptors=descriptors,
            resolver=resolver,
            settings=settings,
            grace_period=grace_period,
            observers=observers,
            health=health,
            wait_for_backend=wait_for_backend,
        ):
            yield

    return lifespan
