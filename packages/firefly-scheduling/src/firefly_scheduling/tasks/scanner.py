"""`scan`: the only place that imports application modules to find `@scheduled` tasks.

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
from collections.abc import Iterable, Iterator
from types import ModuleType

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.decorator import descriptor_of
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_descriptors


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


def _tasks_of(module: ModuleType) -> Iterator[ScheduledDescriptor]:
    for value in list(vars(module).values()):
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if isinstance(value, type):
            yield from _tasks_of_class(value, module.__name__)
        elif (descriptor := descriptor_of(value)) is not None:
            yield descriptor


def _tasks_of_class(cls: type, module_name: str) -> Iterator[ScheduledDescriptor]:
    for value in vars(cls).values():
        if isinstance(value, type):
            # A nested class defined here, not an attribute pointing elsewhere.
            if value.__module__ == module_name and value.__qualname__.startswith(
                f"{cls.__qualname__}."
            ):
                yield from _tasks_of_class(value, module_name)
        elif (descriptor := descriptor_of(value)) is not None and descriptor.module == module_name:
            yield descriptor
