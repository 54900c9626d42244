"""Boot the asyncio host: validate every task and build its `AsyncTaskRuntime`.

The asyncio twin of `hosts.boot.build_runtime`, with the same checks (descriptors,
initial-delay rules, the method tasks' objects, the anchor store, the history URL)
and one more: the lock must be an asyncio lock (`AsyncDistributedLock`). A
synchronous lock is refused here, naming it, rather than failing on the first fire
with "never awaited". The backend's answer is awaited by `wait_for_async_backend`,
on the loop the host will run on.
"""

from __future__ import annotations

from collections.abc import Sequence

from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.runner_async import AsyncFireRunner
from firefly_scheduling.hosts.observation.backend_watch import BackendWatch
from firefly_scheduling.hosts.observation.observers import FireObserver
from firefly_scheduling.hosts.runtime.asyncio_lock_selection import configured_async_lock
from firefly_scheduling.hosts.runtime.asyncio_runtime import AsyncTaskRuntime
from firefly_scheduling.hosts.runtime.boot import initial_delay_gate
from firefly_scheduling.hosts.runtime.catch_up_history import check_catch_up_history
from firefly_scheduling.hosts.runtime.lock_safety import check_lock_guards, check_task_locks
from firefly_scheduling.hosts.runtime.probe_async import wait_for_backend
from firefly_scheduling.hosts.runtime.task_objects import build_task_objects
from firefly_scheduling.hosts.runtime.task_runtime import Lazy
from firefly_scheduling.initial_delay.gate import delayed_tasks
from firefly_scheduling.locks.port import AsyncDistributedLock, check_flavour
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.callables import Resolver
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor


def build_async_runtime(
    descriptors: Sequence[ScheduledDescriptor],
    settings: Settings,
    *,
    host: str,
    lock: object | None = None,
    resolver: Resolver | None = None,
    eager: bool = True,
    node: str | None = None,
    observers: Sequence[FireObserver] = (),
    control: AsyncControlStore | None = None,
) -> AsyncTaskRuntime:
    """The runtime of an asyncio host running `descriptors` (already validated).

    `lock` (an `AsyncDistributedLock`) wins over the configured provider; anything
    else is refused with `ConfigurationError` naming it. `eager=False` defers the
    lock, the store and the history to the first fire (the library host).
    `control`: the host's control store, which the fire runner reads the pauses
    from too (one client per host); the host closes it.
    """
    check_task_locks(descriptors, settings)
    check_catch_up_history(descriptors, settings)
    gate = initial_delay_gate(descriptors, settings, host=host)
    lock_value: Lazy[AsyncDistributedLock] = (
        Lazy.of(asyncio_lock(lock))
        if lock is not None
        else Lazy(lambda: asyncio_lock(configured_async_lock(settings)))
    )
    runtime = AsyncTaskRuntime(
        lock=lock_value,
        gate=gate,
        resolver=resolver,
        node=node or settings.node,
        # Said once at ERROR when the backend stops answering after boot, and when it
        # answers again (`hosts.observation.backend_watch`).
        observers=(*observers, BackendWatch()),
        fire_runner=lambda built: AsyncFireRunner.from_settings(
            built.lock.get(), settings, clock=built.wall_now, node=built.node, control=control
        ),
    )
    if eager:
        built = lock_value.get()
        if lock is None:
            # An asyncio lock opens its connection on first use: a refusal here leaves
            # nothing open, so there is nothing to close (the sync boot closes its lock).
            check_lock_guards(descriptors, settings, built, host=host)
        build_task_objects(descriptors, runtime.callables)
        if delayed_tasks(descriptors):
            gate.get()
        runtime.fire_runner.get()  # an unusable history URL fails here, at boot
    return runtime


async def wait_for_async_backend(runtime: AsyncTaskRuntime, *, seconds: float) -> None:
    """Return once the runtime's lock backend answers (see `hosts.runtime.probe`).

    On `BackendUnavailable` (or a refusal) the runtime is closed, its lock included,
    as a stop would, and the error raised.
    """
    try:
        await wait_for_backend(runtime.lock.get(), seconds=seconds)
    except BaseException:
        await runtime.aclose()
        raise


def asyncio_lock(lock: object) -> AsyncDistributedLock:
    """`lock` when it is an asyncio lock; `ConfigurationError` naming it otherwise."""
    try:
        check_flavour(lock, asynchronous=True)
    except TypeError as err:
        raise ConfigurationError(
            f"{err}; an asyncio host awaits its lock: use the backend's asyncio twin "
            "(AsyncInMemoryLock for InMemoryLock, and so on)"
        ) from err
    if not isinstance(lock, AsyncDistributedLock):
        raise ConfigurationError(
            f"not a lock: {type(lock).__module__}.{type(lock).__qualname__} has no "
            "try_acquire/release/aclose coroutines"
        )
    return lock
