"""Runtime schedules as tasks: what is checked when one is added and when a node runs it.

A runtime schedule is a name, the target of a callable the code allows
(`tasks.schedulable`) and the `@scheduled` arguments, read by `schedule_descriptor`
exactly as the decorator reads them. The stored descriptor names the callable; the
task a node runs is that descriptor under the schedule's NAME (`RuntimeTask.task`):
its fires are claimed, locked (`lock=True` names the lock after the schedule) and
recorded under the name, so two schedules of one callable are two tasks.

The same checks run on both sides: when the schedule is added, and on every node
that reads it from the store, since whoever can write the store directly must not
make a node run a callable the code does not allow.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, cast

from firefly_scheduling.control.records import (
    ALL_TASKS,
    RuntimeSchedule,
    checked_text,
    is_runtime_schedule_name,
)
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.validation import RESERVED_LOCK_PREFIX
from firefly_scheduling.tasks.decorator import ScheduleArguments, schedule_descriptor
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_target

#: The `@scheduled` arguments a runtime schedule takes (all of the decorator's).
SCHEDULE_ARGUMENTS: Final = tuple(ScheduleArguments.__annotations__)
#: Arguments a runtime schedule refuses, and why: each needs what a host sets up at boot.
_BOOT_ONLY: Final = {
    "initial_delay": "its window is anchored when a host boots with the task",
    "catchup": "missed fires are caught up when a host boots with the task",
    "catchup_limit": "missed fires are caught up when a host boots with the task",
}


@dataclass(frozen=True)
class RuntimeTask:
    """A runtime schedule a node may run: `task` is its descriptor under the schedule's name."""

    schedule: RuntimeSchedule
    task: ScheduledDescriptor

    @property
    def name(self) -> str:
        return self.schedule.name

    @property
    def callable_target(self) -> str:
        """The target of the callable its fires run."""
        return self.schedule.descriptor.target


def runtime_descriptor(
    name: str, target: str, arguments: Mapping[str, Any], *, allowed: Collection[str]
) -> ScheduledDescriptor:
    """The descriptor stored for schedule `name` of `target`; refused naming the bad value.

    `allowed` holds the targets the code allows (`tasks.discovery.runtime_targets`).
    """
    name = checked_name(name, allowed)
    target = checked_target(name, target, allowed)
    unknown = sorted(set(arguments) - set(SCHEDULE_ARGUMENTS))
    if unknown:
        raise ConfigurationError(
            f"runtime schedule {name!r}: unknown argument(s) {', '.join(unknown)}; "
            f"the @scheduled arguments are {', '.join(SCHEDULE_ARGUMENTS)}"
        )
    for argument, why in _BOOT_ONLY.items():
        if arguments.get(argument) is not None:
            raise ConfigurationError(
                f"runtime schedule {name!r}: {argument}={arguments[argument]!r} is not taken "
                f"by a runtime schedule ({why}); declare the task with @scheduled instead"
            )
    try:
        given = cast(ScheduleArguments, dict(arguments))  # its keys were checked above
        return schedule_descriptor(target, lock_named_after=name, **given)
    except ConfigurationError as err:
        raise ConfigurationError(f"runtime schedule {name!r}: {err}") from err


def checked_name(name: object, allowed: Collection[str]) -> str:
    """`name` if it can name a runtime schedule's task (and its lock, by default): letters,
    digits, `.`, `_` or `-` (`control.records.RUNTIME_SCHEDULE_NAME`), so `pause NAME`
    and `runs --task NAME` take it, and no target of the code."""
    text = checked_text(name, "a runtime schedule's name", required=True)
    if text in allowed:
        raise ConfigurationError(
            f"runtime schedule name {text!r} is the target of a task or @schedulable "
            "callable of the code; its fires would be recorded as that task's: choose "
            "another name"
        )
    if not is_runtime_schedule_name(text):
        raise ConfigurationError(
            f"runtime schedule name {text!r} is not accepted: it must be letters, digits, "
            "'.', '_' or '-', starting with a letter or digit, at most 200 characters (so "
            f"it must not be {ALL_TASKS!r}, a target, or start with {RESERVED_LOCK_PREFIX!r})"
        )
    return text


def checked_target(name: str, target: object, allowed: Collection[str]) -> str:
    """`target` if the code allows runtime schedules to run it, else a `ConfigurationError`."""
    try:
        checked = validate_target(target)
    except ConfigurationError as err:
        raise ConfigurationError(f"runtime schedule {name!r}: {err}") from err
    if checked not in allowed:
        raise ConfigurationError(
            f"runtime schedule {name!r}: target {checked!r} is not schedulable: a runtime "
            "schedule may only name a callable decorated @schedulable or @scheduled and "
            "found by the scan or in the manifest (recompile it with `firefly-scheduling "
            "cache` after adding one)"
        )
    return checked


def runtime_task(schedule: RuntimeSchedule, allowed: Collection[str]) -> RuntimeTask:
    """The task a node runs for `schedule`, checked again as at add time.

    Raises `ConfigurationError` (naming the schedule) for a record the code does not
    allow: a target outside `allowed`, a name that is a code task's, an argument
    only a boot takes.
    """
    descriptor = schedule.descriptor
    checked_name(schedule.name, allowed)
    checked_target(schedule.name, descriptor.target, allowed)
    for argument in _BOOT_ONLY:
        if getattr(descriptor, argument) is not None:
            raise ConfigurationError(
                f"runtime schedule {schedule.name!r}: {argument} is not taken by a runtime schedule"
            )
    return RuntimeTask(schedule, replace(descriptor, target=schedule.name))


def runtime_tasks(
    schedules: Iterable[RuntimeSchedule], allowed: Collection[str]
) -> tuple[list[RuntimeTask], dict[str, ConfigurationError]]:
    """The schedules a node may run, and the refused ones by name with the reason."""
    accepted: list[RuntimeTask] = []
    refused: dict[str, ConfigurationError] = {}
    for schedule in schedules:
        try:
            accepted.append(runtime_task(schedule, allowed))
        except ConfigurationError as err:
            refused[schedule.name] = err
    return accepted, refused
