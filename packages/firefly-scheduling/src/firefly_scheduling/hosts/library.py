"""The library host: `register(scheduler)` puts firefly tasks on the application's APScheduler.

For an application that already runs an APScheduler 3 scheduler (a web app, a
worker) and wants its `@scheduled` tasks there instead of in a separate
`firefly-scheduling run` process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from firefly_scheduling.hosts.apscheduler.jobs import attach_tasks
from firefly_scheduling.hosts.apscheduler.jobs_async import attach_tasks as attach_async_tasks
from firefly_scheduling.hosts.runtime.asyncio_boot import build_async_runtime
from firefly_scheduling.hosts.runtime.boot import build_runtime, synchronous_lock, validated
from firefly_scheduling.hosts.runtime.catch_up import catch_up
from firefly_scheduling.hosts.runtime.catch_up_async import catch_up as catch_up_async
from firefly_scheduling.locks.port import AsyncDistributedLock, DistributedLock
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.callables import Resolver
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.discovery import resolve_descriptors

#: The id of the one-shot job that catches up missed fires when the scheduler starts.
CATCH_UP_JOB_ID = "firefly-scheduling:catch-up"


def register(
    scheduler: Any,
    *,
    descriptors: Sequence[ScheduledDescriptor] | None = None,
    lock: DistributedLock | AsyncDistributedLock | None = None,
    resolver: Resolver | None = None,
    settings: Settings | None = None,
) -> list[str]:
    """Attach the tasks to `scheduler` (an APScheduler 3 scheduler); return the job ids.

    On an `AsyncIOScheduler` every fire is awaited on the scheduler's event loop
    through the asyncio fire runner, with an asyncio lock (`lock`, an
    `AsyncDistributedLock`; a synchronous one is refused here, naming it), and an
    `async def` task runs on that loop. On a threaded scheduler an `async def` task
    runs on an event loop thread of the host's own and its worker waits for it.

    * `descriptors`: the tasks; by default the compiled manifest, else a scan of
      `FIREFLY_SCAN_PACKAGES` (see `resolve_descriptors`).
    * `lock`: wins over the configured `firefly.scheduling.lock.provider`.
    * `resolver(cls) -> instance`: supplies the object a method task runs on (a DI
      container); by default the class is instantiated once with no arguments.
    * `settings`: by default read from the environment.

    Registration is lazy: the tasks are validated now (a bad cron or duration raises
    `ConfigurationError` naming the task), but the lock provider, the anchor store
    and the tasks' modules are reached on the first fire, so registering costs
    nothing in a process whose scheduler never starts. Jobs hold live objects: keep
    them in a memory job store (APScheduler's default). Every fire goes through the
    same initial-delay gate and fire runner as `firefly-scheduling run`. With a task
    with `catchup=`, a one-shot job (`CATCH_UP_JOB_ID`, not among the ids returned)
    catches up its missed fires when the scheduler starts.
    """
    settings = Settings.from_env() if settings is None else settings
    if descriptors is None:
        descriptors = resolve_descriptors(settings).descriptors
    tasks = validated(descriptors)
    if _is_asyncio_scheduler(scheduler):
        async_runtime = build_async_runtime(
            tasks, settings, host="library", lock=lock, resolver=resolver, eager=False
        )
        _catch_up_at_start(scheduler, tasks, catch_up_async, async_runtime)
        return attach_async_tasks(scheduler, tasks, async_runtime)
    runtime = build_runtime(
        tasks,
        settings,
        host="library",
        lock=None if lock is None else synchronous_lock(lock),
        resolver=resolver,
        eager=False,
    )
    _catch_up_at_start(scheduler, tasks, catch_up, runtime)
    return attach_tasks(scheduler, tasks, runtime)


def _catch_up_at_start(
    scheduler: Any, tasks: Sequence[ScheduledDescriptor], job: Any, runtime: Any
) -> None:
    """A one-shot job catching up the `catchup=` tasks' missed fires when the scheduler
    starts (`hosts.runtime.catch_up`), however late after `register` that is."""
    if any(task.catchup is not None for task in tasks):
        scheduler.add_job(
            job,
            args=(tasks, runtime),
            id=CATCH_UP_JOB_ID,
            name="firefly-scheduling catch-up",
            replace_existing=True,
            misfire_grace_time=None,
        )


def _is_asyncio_scheduler(scheduler: object) -> bool:
    # Imported here: apscheduler's asyncio scheduler pulls in asyncio, and `register`
    # is exported from the package root, whose import must stay light.
    from apscheduler.schedulers.asyncio import AsyncIOScheduler  # noqa: PLC0415 - see above

    return isinstance(scheduler, AsyncIOScheduler)
