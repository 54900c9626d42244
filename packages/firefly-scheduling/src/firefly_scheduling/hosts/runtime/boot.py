"""Boot a host: validate every task and build its runtime, or refuse with the reason.

Everything that can be wrong with the configuration is found here, before the first
fire: every descriptor (cron, zone, durations, lock name), the initial-delay rules,
the lock provider, the object of every method task (`task_objects`), the lock
backend itself (`probe.wait_for_backend`: it must answer, within a bounded wait),
the anchor store and the run history. `eager=False` (the library host) defers
building the lock, the objects and the stores to the first fire, but still
validates the tasks.
"""

from __future__ import annotations

from collections.abc import Sequence

from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history.selection import history_factory
from firefly_scheduling.hosts.observation.backend_watch import BackendWatch
from firefly_scheduling.hosts.observation.observers import FireObserver
from firefly_scheduling.hosts.runtime.catch_up_history import check_catch_up_history
from firefly_scheduling.hosts.runtime.lock_safety import check_lock_guards, check_task_locks
from firefly_scheduling.hosts.runtime.probe import wait_for_backend
from firefly_scheduling.hosts.runtime.task_objects import build_task_objects
from firefly_scheduling.hosts.runtime.task_runtime import Lazy, TaskRuntime
from firefly_scheduling.initial_delay.gate import (
    InitialDelayGate,
    check_initial_delays,
    delayed_tasks,
    warn_if_per_process,
)
from firefly_scheduling.initial_delay.selection import resolve_anchor_store
from firefly_scheduling.locks.port import DistributedLock, check_flavour
from firefly_scheduling.locks.providers import configured_lock
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.callables import Resolver
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_descriptor


def validated(descriptors: Sequence[ScheduledDescriptor]) -> tuple[ScheduledDescriptor, ...]:
    """Every descriptor checked and normalised; the first bad one raises, naming its target."""
    return tuple(validate_descriptor(descriptor) for descriptor in descriptors)


def build_runtime(
    descriptors: Sequence[ScheduledDescriptor],
    settings: Settings,
    *,
    host: str,
    lock: DistributedLock | None = None,
    resolver: Resolver | None = None,
    eager: bool = True,
    node: str | None = None,
    observers: Sequence[FireObserver] = (),
    wait_for_backend_seconds: float | None = None,
    control: ControlStore | None = None,
) -> TaskRuntime:
    """The runtime of a host running `descriptors` (already validated).

    An explicit `lock` always wins over the configured provider (and, being the
    caller's choice, is not checked by `check_lock_guards`); `node` over
    `settings.node` (`FIREFLY_SCHEDULING_NODE`, else `<hostname>-<pid>`). Under the cron-driven
    host (`host="tick"`) a per-process anchor store draws a warning naming the
    delayed tasks, because each tick process would re-anchor and never run them.
    `wait_for_backend_seconds` (default `settings.wait_for_backend`) bounds the wait
    for a lock backend that does not answer yet: `BackendUnavailable` after it.
    `control`: the host's control store, which the fire runner then reads the
    pauses from (one client per host); its owner, the host, closes it.
    """
    check_task_locks(descriptors, settings)
    check_catch_up_history(descriptors, settings)
    gate = initial_delay_gate(descriptors, settings, host=host)
    lock_value: Lazy[DistributedLock] = (
        Lazy.of(lock) if lock is not None else Lazy(lambda: configured_lock(settings))
    )
    runtime = TaskRuntime(
        lock=lock_value,
        gate=gate,
        resolver=resolver,
        node=node or settings.node,
        # Said once at ERROR when the backend stops answering after boot, and when it
        # answers again (`hosts.observation.backend_watch`).
        observers=(*observers, BackendWatch()),
        fire_runner=lambda built: FireRunner.from_settings(
            built.lock.get(), settings, clock=built.wall_now, node=built.node, control=control
        ),
    )
    if eager:
        seconds = settings.wait_for_backend
        if wait_for_backend_seconds is not None:
            seconds = wait_for_backend_seconds
        _boot_or_close(runtime, descriptors, settings, host=host, check=lock is None, wait=seconds)
    return runtime


def _boot_or_close(
    runtime: TaskRuntime,
    descriptors: Sequence[ScheduledDescriptor],
    settings: Settings,
    *,
    host: str,
    check: bool,
    wait: float,
) -> None:
    """Everything a host checks before its first fire; what was built is closed on refusal.

    In order: the lock (and its guards, for a configured one), the method tasks'
    objects, the history URL, the backend's answer, the anchor store, the run history
    (built, its table checked). Configuration first: waiting for a backend cannot fix it.
    """
    try:
        built = runtime.lock.get()
        if check:
            check_lock_guards(descriptors, settings, built, host=host)
        build_task_objects(descriptors, runtime.callables)
        history_factory(settings)  # a history URL no store accepts: no wait fixes it
        wait_for_backend(built, seconds=wait)
        if delayed_tasks(descriptors):
            runtime.gate.get()
        runtime.fire_runner.get()
    except BaseException:
        runtime.close()  # as at a stop: the lock too, whoever built it
        raise


def initial_delay_gate(
    descriptors: Sequence[ScheduledDescriptor], settings: Settings, *, host: str
) -> Lazy[InitialDelayGate]:
    """The initial-delay rules checked now; the gate (and its store) built on first use.

    Under the cron-driven host (`host="tick"`) a per-process anchor store draws a
    warning naming the delayed tasks, because each tick process would re-anchor.
    """
    check_initial_delays(descriptors, settings)

    def build_gate() -> InitialDelayGate:
        store = resolve_anchor_store(settings)
        if host == "tick":
            warn_if_per_process(store, descriptors, host=host)
        return InitialDelayGate(store, release=settings.initial_delay_release)

    return Lazy(build_gate)


def synchronous_lock(lock: object) -> DistributedLock:
    """`lock` when it is a synchronous lock; `ConfigurationError` naming it otherwise."""
    try:
        check_flavour(lock, asynchronous=False)
    except TypeError as err:
        raise ConfigurationError(
            f"{err}; a threaded host calls its lock: use the backend's synchronous lock "
            "(InMemoryLock for AsyncInMemoryLock, and so on), or an AsyncIOScheduler "
            "for an asyncio lock"
        ) from err
    if not isinstance(lock, DistributedLock):
        raise ConfigurationError(
            f"not a lock: {type(lock).__module__}.{type(lock).__qualname__} has no "
            "try_acquire/release methods"
        )
    return lock
