"""`scan`: the only place that imports application modules to find `@scheduled` tasks
(and, with `scan_schedulable`, the `@schedulable` callables runtime schedules may name).

It imports each configured package and every module below it (skipping
`__main__` modules, which are scripts), then collects the decorated functions
defined in each module and the decorated methods of the classes defined there,
nested classes included. A function re-exported by another module is found once,
in the module that defines it. The result is validated and sorted by target, so
two scans of the same code give the same list on every node.

Everything else (the manifest, the hosts) works from the plain descriptors and
imports a task's module only when the task first runs.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import TypeVar

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.decorator import descriptor_of
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.schedulable import schedulable_target_of
from firefly_scheduling.tasks.validation import validate_descriptors

#: What a scan reads off a callable: a task's descriptor, or a `@schedulable` target.
_Mark = TypeVar("_Mark", ScheduledDescriptor, str)


def scan(packages: Iterable[str]) -> list[ScheduledDescriptor]:
    """Import `packages` recursively; return their tasks, validated, sorted by target."""
    found: dict[str, ScheduledDescriptor] = {}
    for package in packages:
        for module in _modules_of(package.strip(), package.strip()):
            for descriptor in _tasks_of(module):
                found[descriptor.target] = descriptor
    return list(validate_descriptors(found[target] for target in sorted(found)))


def _modules_of(name: str, scanning: str) -> Iterator[ModuleType]:
    """`name` and, for a package, every module below it, in sorted order."""
    module = _import(name, scanning=scanning)
    yield module
    path = getattr(module, "__path__", None)
    if path is None:
        return
    children = sorted(info.name for info in pkgutil.iter_modules(path, prefix=f"{name}."))
    for child in children:
        if child.rpartition(".")[2] != "__main__":  # a script: importing it would run it
            yield from _modules_of(child, scanning)


def _import(name: str, *, scanning: str) -> ModuleType:
    if not name:
        raise ConfigurationError("cannot scan an empty package name (check FIREFLY_SCAN_PACKAGES)")
    try:
        return importlib.import_module(name)
    except Exception as err:  # application code may raise anything at import
        where = f"module {name!r}" if name == scanning else f"module {name!r} of {scanning!r}"
        raise ConfigurationError(
            f"scanning for @scheduled tasks: importing {where} failed: {type(err).__name__}: {err}"
        ) from err


def scan_schedulable(packages: Iterable[str]) -> list[str]:
    """The targets of the `@schedulable` callables of `packages`, sorted (imports as `scan`)."""
    found: set[str] = set()
    for package in packages:
        for module in _modules_of(package.strip(), package.strip()):
            found.update(_marked_in(module, schedulable_target_of))
    return sorted(found)


def _tasks_of(module: ModuleType) -> Iterator[ScheduledDescriptor]:
    return _marked_in(module, descriptor_of)


def _marked_in(module: ModuleType, read: Callable[[object], _Mark | None]) -> Iterator[_Mark]:
    """What `read` finds on the functions of `module` and on the methods of its classes."""
    for value in list(vars(module).values()):
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if isinstance(value, type):
            yield from _marked_in_class(value, module.__name__, read)
        elif (mark := read(value)) is not None:
            yield mark


def _marked_in_class(
    cls: type, module_name: str, read: Callable[[object], _Mark | None]
) -> Iterator[_Mark]:
    for value in vars(cls).values():
        if isinstance(value, type):
            # A nested class defined here, not an attribute pointing elsewhere.
            if value.__module__ == module_name and value.__qualname__.startswith(
                f"{cls.__qualname__}."
            ):
                yield from _marked_in_class(value, module_name, read)
        elif (mark := read(value)) is not None and _module_of(mark) == module_name:
            yield mark


def _module_of(mark: ScheduledDescriptor | str) -> str:
    target = mark.target if isinstance(mark, ScheduledDescriptor) else mark
    return target.partition(":")[0]
