"""`@schedulable`: allow runtime schedules to name a callable.

A runtime schedule (`firefly-scheduling schedules add`, `add_runtime_schedule`)
names a callable by its target and is kept in the control store, which more people
and programs may write than may deploy code. So a runtime schedule may only name
a callable the code itself allows: one decorated `@schedulable` (or already
`@scheduled`) and found by the scan or in the compiled manifest. Anything else is
refused when it is added, and ignored, with an error, by the nodes.

Like `@scheduled`, the decorator only marks the function (under
`__firefly_schedulable__`, holding its target) and returns it unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.validation import validate_target

#: The attribute holding the target of a `@schedulable` function.
SCHEDULABLE_ATTRIBUTE = "__firefly_schedulable__"

_Function = TypeVar("_Function", bound=Callable[..., Any])


@overload
def schedulable(function: _Function, /) -> _Function: ...
@overload
def schedulable() -> Callable[[_Function], _Function]: ...
def schedulable(function: Any = None, /) -> Any:
    """Allow runtime schedules to run the decorated function or method.

    Used bare (`@schedulable`) or called (`@schedulable()`). The callable must be
    importable by name (module or class level), as a `@scheduled` task must be.
    """
    if function is None:
        return _mark
    return _mark(function)


def _mark(task: _Function) -> _Function:
    function = task.__func__ if isinstance(task, staticmethod | classmethod) else task
    if not callable(function) or not hasattr(function, "__qualname__"):
        raise ConfigurationError(
            f"@schedulable decorates a function or a method, got {type(task).__name__}: {task!r}"
        )
    target = validate_target(f"{function.__module__}:{function.__qualname__}")
    setattr(function, SCHEDULABLE_ATTRIBUTE, target)
    return task


def schedulable_target_of(candidate: object) -> str | None:
    """The target `@schedulable` recorded on `candidate` (a static or class method
    unwrapped), or None."""
    if isinstance(candidate, staticmethod | classmethod):
        candidate = candidate.__func__
    found = getattr(candidate, SCHEDULABLE_ATTRIBUTE, None)
    return found if isinstance(found, str) else None
