"""Boot validation: every value of a task is checked before any host schedules it.

`validate_descriptor` runs when the decorator runs, when `scan` emits descriptors
and when `ScheduledManifest.load` reads them, so a bad cron, zone, duration or
lock name stops the boot with a message naming the task target and the value,
instead of failing on the fifth tick. It is also the single definition of what a
valid `ScheduledDescriptor` is, whoever built it.

Cron parsing is cached per (expression, zone): a manifest with thousands of tasks
typically repeats a few expressions, and loading it must stay fast.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from firefly_scheduling.cron import CronSchedule
from firefly_scheduling.descriptor import DEFAULT_LOCK_TTL_SECONDS, ScheduledDescriptor
from firefly_scheduling.durations import parse_duration
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.validation import validate_lock_name

TRIGGERS = ("cron", "fixed_rate", "fixed_delay")
DURATION_FIELDS = ("fixed_rate", "fixed_delay", "initial_delay", "lock_ttl")


def validate_target(target: object) -> str:
    """Return `target` if it is an importable `"package.module:Qualname"`, else refuse it."""
    if not isinstance(target, str):
        raise ConfigurationError(f"a task target must be a str, got {target!r}")
    module, colon, qualname = target.partition(":")
    if not colon or not _dotted_identifiers(module) or not _dotted_identifiers(qualname):
        hint = (
            "a function defined inside another function cannot be imported by name; "
            "define it at module or class level"
            if "<locals>" in qualname
            else "expected 'package.module:function' or 'package.module:Class.method'"
        )
        raise ConfigurationError(f"task target {target!r} is not importable: {hint}")
    return target


def validate_descriptor(descriptor: ScheduledDescriptor) -> ScheduledDescriptor:
    """Check every field of `descriptor`; return it, normalised (float seconds, default TTL).

    Errors are `ConfigurationError`s (a `DurationError` for a bad duration) whose
    message starts with the task target.
    """
    if not isinstance(descriptor, ScheduledDescriptor):
        raise ConfigurationError(f"expected a ScheduledDescriptor, got {descriptor!r}")
    target = validate_target(descriptor.target)
    triggers = [name for name in TRIGGERS if getattr(descriptor, name) is not None]
    if len(triggers) != 1:
        raise ConfigurationError(
            f"{target}: needs exactly one of cron=, fixed_rate=, fixed_delay=; "
            f"got {', '.join(triggers) or 'none'}"
        )
    if descriptor.cron is not None:
        CronSchedule.parse(descriptor.cron, descriptor.zone, source=target)
    elif descriptor.zone is not None:
        raise ConfigurationError(
            f"{target}: zone={descriptor.zone!r} only applies to cron tasks; "
            "fixed_rate and fixed_delay intervals do not depend on a time zone"
        )
    changes: dict[str, Any] = {}
    if descriptor.lock_name is None:
        if descriptor.lock_ttl is not None:
            raise ConfigurationError(
                f"{target}: lock_ttl={descriptor.lock_ttl!r} is given but the task is not "
                "locked; pass lock=True or a lock name"
            )
    else:
        _check_lock_name(descriptor.lock_name, target)
        if descriptor.lock_ttl is None:
            changes["lock_ttl"] = DEFAULT_LOCK_TTL_SECONDS
    for name in DURATION_FIELDS:
        value = getattr(descriptor, name)
        if value is not None:
            _check_seconds(value, f"{target} {name}")
            if not isinstance(value, float):
                changes[name] = float(value)
    return replace(descriptor, **changes) if changes else descriptor


def _check_seconds(value: object, source: str) -> None:
    """A descriptor holds durations as numbers of seconds, already parsed."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{source}: expected a number of seconds, got {value!r}")
    parse_duration(value, source=source)


def _check_lock_name(name: object, target: str) -> None:
    try:
        validate_lock_name(name, source=f"{target}: lock name")
    except (TypeError, ValueError) as err:
        raise ConfigurationError(str(err)) from err


def _dotted_identifiers(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))
