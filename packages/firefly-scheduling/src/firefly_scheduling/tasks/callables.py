"""Task targets back to callables: `resolve_callable` and `CallableResolver`.

A manifest names each task by its target (`"pkg.module:function"` or
`"pkg.module:Class.method"`) and loading it imports nothing. This module turns a
target back into something callable, importing the task's module on first use
only, and instantiating a method's class once (or through the application's DI
container, a `Resolver`). Every host resolves through it; so may an application
that runs a task itself under `guard.run_guarded`.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.validation import validate_target

#: `resolver(cls) -> instance`: how a host obtains the object a method task runs on.
Resolver = Callable[[type], object]


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
        self._aliases: dict[str, str] = {}

    def resolve(self, target: str) -> Callable[..., Any]:
        """The callable for `target` (`"pkg.module:function"` or `"pkg.module:Class.method"`),
        or for a name given to `alias`."""
        target = self._aliases.get(target, target)
        found = self._callables.get(target)
        if found is not None:
            return found
        with self._mutex:
            found = self._callables.get(target)
            if found is None:
                found = self._callables[target] = self._load(target)
        return found

    def alias(self, name: str, target: str) -> None:
        """Make `resolve(name)` the callable of `target` (a runtime schedule's task is
        named after the schedule, and runs a callable of the code)."""
        with self._mutex:
            self._aliases[name] = validate_target(target)

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
                advice = (
                    "; a method task's object is made with no arguments: give __init__ "
                    "defaults, or register the tasks with a resolver(cls) -> instance "
                    "(register(scheduler, resolver=...), scheduled_tasks(resolver=...))"
                    if self._resolver is None
                    else "; check that the resolver can make it"
                )
                raise ConfigurationError(
                    f"{target}: cannot instantiate {cls.__qualname__}: "
                    f"{type(err).__name__}: {err}{advice}"
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
