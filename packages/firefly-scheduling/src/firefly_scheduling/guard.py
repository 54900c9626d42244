"""The plain lock guard, and the lazy task resolver.

The hosts run every fire through `fires.FireRunner`, which adds per-fire claims,
keep-alive, fencing and history on top of the same rules. `run_guarded` is those
rules alone, for an application that runs a task itself (a management command, a
worker's own loop) and wants "at most one node at a time" without fire identity:

* an unlocked task runs;
* a lost race (`try_acquire` returned False) skips silently (debug log only):
  another node is running this fire;
* a `LockBackendError` from `try_acquire` is logged and the run is skipped: a task
  never runs unlocked because its lock server was down;
* an exception from the body is logged with the task target and swallowed, so one
  failing task never stops the others;
* the lock is released in `finally`, whatever happened.

`resolve_callable` turns a target back into something callable, importing the
task's module on first use only (loading a manifest imports nothing).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from firefly_scheduling.descriptor import DEFAULT_LOCK_TTL_SECONDS, ScheduledDescriptor
from firefly_scheduling.errors import ConfigurationError, LockBackendError
from firefly_scheduling.locks.port import DistributedLock
from firefly_scheduling.validation import validate_target

logger = logging.getLogger("firefly_scheduling.guard")

#: `resolver(cls) -> instance`: how a host obtains the object a method task runs on.
Resolver = Callable[[type], object]


class RunOutcome(enum.Enum):
    """What `run_guarded` did with one fire of a task."""

    RAN = "ran"
    FAILED = "failed"
    SKIPPED_LOCKED = "skipped: another node holds the lock"
    SKIPPED_BACKEND_ERROR = "skipped: the lock backend failed"


def run_guarded(
    descriptor: ScheduledDescriptor, body: Callable[[], object], lock: DistributedLock
) -> RunOutcome:
    """Run `body` for `descriptor` under its lock, following the rules in the module doc.

    Only `Exception`s from the body are swallowed; `KeyboardInterrupt` and
    `SystemExit` still propagate, after the lock is released.
    """
    target = descriptor.target
    if inspect.iscoroutinefunction(body):
        # It would only build a coroutine: "ran" would be reported for a body that never
        # did. The hosts await such tasks (`hosts.task_calls`); this plain guard cannot.
        raise TypeError(
            f"{target}: run_guarded cannot run an async def body; run it on a host "
            "(firefly-scheduling run/tick, register(), or contrib.starlette)"
        )
    name = descriptor.lock_name
    if name is not None:
        ttl = descriptor.lock_ttl if descriptor.lock_ttl is not None else DEFAULT_LOCK_TTL_SECONDS
        try:
            acquired = lock.try_acquire(name, ttl)
        except LockBackendError as err:
            logger.warning("%s: skipped, the lock %r could not be taken: %s", target, name, err)
            return RunOutcome.SKIPPED_BACKEND_ERROR
        if not acquired:
            logger.debug("%s: skipped, the lock %r is held elsewhere", target, name)
            return RunOutcome.SKIPPED_LOCKED
    try:
        returned = body()
        if inspect.isawaitable(returned):
            if inspect.iscoroutine(returned):
                returned.close()  # never run: no "never awaited" warning on top
            raise TypeError(f"{target}: the body returned an awaitable this guard cannot await")
    except Exception:
        logger.exception("%s: the task raised", target)
        return RunOutcome.FAILED
    finally:
        if name is not None:
            lock.release(name)
    return RunOutcome.RAN


class CallableResolver:
    """Resolves targets to callables, importing modules and instantiating classes lazily.

    A method's class is instantiated once per resolver (with no arguments, or with
    `resolver(cls)` for a DI container) and the instance is reused for every method
    of that class. Thread-safe: two first runs at once build one instance.
    """

    def __init__(self, resolver: Resolver | None = None) -> None:
        self._resolver = resolver
        self._mutex = threading.Lock()
        self._instances: dict[type, object] = {}
        self._callables: dict[str, Callable[..., Any]] = {}

    def resolve(self, target: str) -> Callable[..., Any]:
        """The callable for `target` (`"pkg.module:function"` or `"pkg.module:Class.method"`)."""
        found = self._callables.get(target)
        if found is not None:
            return found
        with self._mutex:
            found = self._callables.get(target)
            if found is None:
                found = self._callables[target] = self._load(target)
        return found

    def _load(self, target: str) -> Callable[..., Any]:
        module_name, _, qualname = validate_target(target).partition(":")
        try:
            owner: Any = importlib.import_module(module_name)
        except Exception as err:  # application code may raise anything at import
            raise ConfigurationError(
                f"{target}: importing module {module_name!r} failed: {type(err).__name__}: {err}"
            ) from err
        *class_path, attribute = qualname.split(".")
        try:
            for part in class_path:
                owner = getattr(owner, part)
            if class_path:
                owner = self._instance_of(owner, target)
            found = getattr(owner, attribute)
        except AttributeError as err:
            raise ConfigurationError(
                f"{target}: not found in {module_name!r} ({err}); recompile the manifest"
            ) from err
        if not callable(found):
            raise ConfigurationError(f"{target}: is not callable: {found!r}")
        return found  # type: ignore[no-any-return]

    def _instance_of(self, cls: object, target: str) -> object:
        if not isinstance(cls, type):
            raise ConfigurationError(f"{target}: {cls!r} is not a class")
        instance = self._instances.get(cls)
        if instance is None:
            try:
                instance = cls() if self._resolver is None else self._resolver(cls)
            except Exception as err:  # the application's constructor or container
                raise ConfigurationError(
                    f"{target}: cannot instantiate {cls.__qualname__}: {type(err).__name__}: {err}"
                ) from err
            self._instances[cls] = instance
        return instance


_default_resolvers: dict[Resolver | None, CallableResolver] = {}
_default_mutex = threading.Lock()


def resolve_callable(target: str, resolver: Resolver | None = None) -> Callable[..., Any]:
    """The callable for `target`, cached per process (per `resolver`).

    Imports the task's module on first use. For a method, its class is instantiated
    once per process: with no arguments, or through `resolver(cls)`.
    """
    with _default_mutex:
        cache = _default_resolvers.get(resolver)
        if cache is None:
            cache = _default_resolvers[resolver] = CallableResolver(resolver)
    return cache.resolve(target)
