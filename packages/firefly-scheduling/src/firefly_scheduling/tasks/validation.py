"""Boot validation: every value of a task is checked before any host schedules it.

`validate_descriptor` runs when the decorator runs, and `validate_descriptors`
when `scan` emits descriptors and when `ScheduledManifest.load` reads them, so a
bad cron, zone, DST policy (or one on a task that is not cron), duration (outside
1 ms to 366 days, see `durations`), jitter not shorter than the task's period or
lock name (invalid, or in the reserved `firefly:` namespace) stops the boot with a
message naming the task target and the value, instead of failing on the fifth tick.
This module is the single definition of what a valid `ScheduledDescriptor` is,
whoever built it.

A `timeout` is a duration like the others, and nothing more: it is not bounded by
`lock_ttl` (the keep-alive renews the task lock while the body runs, so a body may
outlast its TTL many times), nor by the period (a run that outlasts its period has
its next fire skipped as overlapping, with or without a timeout).

Loading a manifest of thousands of tasks must stay fast, yet such a manifest
repeats a handful of durations, crons and modules. A `DescriptorValidator`
therefore checks each distinct value once and remembers it as valid; the first
task carrying a bad value is the one named in the error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.validation import RESERVED_LOCK_PREFIX, validate_lock_name
from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.durations import parse_duration, readable_duration
from firefly_scheduling.schedule.jitter import shortest_cron_gap
from firefly_scheduling.tasks.catch_up_validation import check_catch_up
from firefly_scheduling.tasks.descriptor import DEFAULT_LOCK_TTL_SECONDS, ScheduledDescriptor
from firefly_scheduling.tasks.overlap import check_overlap
from firefly_scheduling.tasks.retry_arguments import check_retry_arguments

TRIGGERS = ("cron", "fixed_rate", "fixed_delay")
DURATION_FIELDS = (
    "fixed_rate",
    "fixed_delay",
    "initial_delay",
    "lock_ttl",
    "jitter",
    "timeout",
    "retry_backoff",
    "retry_backoff_max",
    "catchup",
)


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
    return DescriptorValidator().validate(descriptor)


def validate_descriptors(
    descriptors: Iterable[ScheduledDescriptor],
) -> tuple[ScheduledDescriptor, ...]:
    """`validate_descriptor` over many tasks, checking each distinct value only once."""
    validate = DescriptorValidator().validate
    return tuple(validate(descriptor) for descriptor in descriptors)


class DescriptorValidator:
    """Validates descriptors, remembering what it has already accepted.

    Apart from its target and lock name, a task is its "shape": trigger, zone,
    durations and whether it is locked. A shape is checked once; later tasks of
    the same shape only have their target and lock name checked. Durations are
    part of the shape with their type, so `True` is never taken for an accepted
    `1.0`.
    """

    def __init__(self) -> None:
        self._modules: set[str] = set()
        # shape -> the normalising changes every descriptor of that shape needs
        self._shapes: dict[tuple[object, ...], dict[str, Any]] = {}

    def validate(self, descriptor: ScheduledDescriptor) -> ScheduledDescriptor:
        """See `validate_descriptor`."""
        if not isinstance(descriptor, ScheduledDescriptor):
            raise ConfigurationError(f"expected a ScheduledDescriptor, got {descriptor!r}")
        target = self.validate_identity(descriptor.target, descriptor.lock_name)
        shape = _shape(descriptor)
        changes = self._shapes.get(shape)
        if changes is None:
            changes = self._shapes[shape] = _check_shape(descriptor, target)
        return replace(descriptor, **changes) if changes else descriptor

    def validate_identity(self, target: object, lock_name: object) -> str:
        """Check what is unique to each task: its target and its lock name (None: unlocked).

        For a loader that has already validated the rest of the task's shape.
        """
        if not (isinstance(target, str) and self._known_module_of(target)):
            target = validate_target(target)
            self._modules.add(target.partition(":")[0])
        if lock_name is not None:
            _check_lock_name(lock_name, target)
        return target

    def _known_module_of(self, target: str) -> bool:
        """Whether `target` is well formed, in a module already seen (only its qualname is new)."""
        module, colon, qualname = target.partition(":")
        return bool(colon) and module in self._modules and _dotted_identifiers(qualname)


def _shape(descriptor: ScheduledDescriptor) -> tuple[object, ...]:
    rate, delay = descriptor.fixed_rate, descriptor.fixed_delay
    initial, ttl = descriptor.initial_delay, descriptor.lock_ttl
    return (
        descriptor.cron,
        descriptor.zone,
        descriptor.dst_gap,
        descriptor.dst_fold,
        descriptor.lock_name is None,
        type(rate),
        rate,
        type(delay),
        delay,
        type(initial),
        initial,
        type(ttl),
        ttl,
        type(descriptor.jitter),
        descriptor.jitter,
        type(descriptor.timeout),
        descriptor.timeout,
        type(descriptor.retries),
        descriptor.retries,
        type(descriptor.retry_backoff),
        descriptor.retry_backoff,
        type(descriptor.retry_backoff_max),
        descriptor.retry_backoff_max,
        type(descriptor.overlap),
        descriptor.overlap,
        type(descriptor.catchup),
        descriptor.catchup,
        type(descriptor.catchup_limit),
        descriptor.catchup_limit,
    )


def _check_shape(descriptor: ScheduledDescriptor, target: str) -> dict[str, Any]:
    """Check everything but the target and lock name; return the normalising changes."""
    cron, zone = descriptor.cron, descriptor.zone
    given = [name for name in TRIGGERS if getattr(descriptor, name) is not None]
    if len(given) != 1:
        raise ConfigurationError(
            f"{target}: needs exactly one of cron=, fixed_rate=, fixed_delay=; "
            f"got {', '.join(given) or 'none'}"
        )
    schedule = None
    if cron is not None:
        schedule = CronSchedule.parse(
            cron, zone, source=target, dst_gap=descriptor.dst_gap, dst_fold=descriptor.dst_fold
        )
    else:
        _refuse_wall_clock_settings(descriptor, target)
    changes: dict[str, Any] = {}
    if descriptor.lock_name is None:
        if descriptor.lock_ttl is not None:
            raise ConfigurationError(
                f"{target}: lock_ttl={descriptor.lock_ttl!r} is given but the task is not "
                "locked; pass lock=True or a lock name"
            )
    elif descriptor.lock_ttl is None:
        changes["lock_ttl"] = DEFAULT_LOCK_TTL_SECONDS
    for name in DURATION_FIELDS:
        value = getattr(descriptor, name)
        if value is not None:
            _check_seconds(value, f"{target} {name}")
            if type(value) is not float:
                changes[name] = float(value)
    if descriptor.jitter is not None:
        _check_jitter(descriptor, float(descriptor.jitter), schedule, target)
    check_retry_arguments(descriptor, target)
    overlap = check_overlap(
        descriptor.overlap,
        target,
        locked=descriptor.lock_name is not None,
        fixed_delay=descriptor.fixed_delay is not None,
    )
    if overlap is None and descriptor.overlap is not None:  # "skip" is the default
        changes["overlap"] = None
    limit = check_catch_up(descriptor, target)
    if limit != descriptor.catchup_limit:
        changes["catchup_limit"] = limit
    return changes


def _refuse_wall_clock_settings(descriptor: ScheduledDescriptor, target: str) -> None:
    """An interval task is measured in elapsed time: a zone or a DST policy cannot apply."""
    for name in ("zone", "dst_gap", "dst_fold"):
        value = getattr(descriptor, name)
        if value is not None:
            raise ConfigurationError(
                f"{target}: {name}={value!r} only applies to cron tasks; fixed_rate and "
                "fixed_delay intervals are elapsed time, which no time zone or clock change moves"
            )


def _check_jitter(
    descriptor: ScheduledDescriptor, jitter: float, schedule: CronSchedule | None, target: str
) -> None:
    """A jitter must be shorter than the time between two fires, or fires could reorder.

    An interval task's period is its `fixed_rate` or `fixed_delay`; a cron task's is
    the shortest gap between two of its instants (`shortest_cron_gap`).
    """
    if schedule is None:
        kind = "fixed_rate" if descriptor.fixed_rate is not None else "fixed_delay"
        period = float(descriptor.fixed_rate or descriptor.fixed_delay or 0.0)
        what = f"its {kind} of {readable_duration(period)}"
    else:
        period = shortest_cron_gap(schedule)
        what = f"the shortest gap between two fires of its cron, {readable_duration(period)}"
    if jitter >= period:
        raise ConfigurationError(
            f"{target}: jitter={readable_duration(jitter)} is not shorter than "
            f"{what}; a jittered fire could start after the next one; give a smaller jitter"
        )


def _check_seconds(value: object, source: str) -> None:
    """A descriptor holds durations as numbers of seconds, already parsed."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{source}: expected a number of seconds, got {value!r}")
    parse_duration(value, source=source)


def _check_lock_name(name: object, target: str) -> None:
    try:
        validate_lock_name(name)
    except (TypeError, ValueError) as err:
        raise ConfigurationError(f"{target}: {err}") from err
    if isinstance(name, str) and name.startswith(RESERVED_LOCK_PREFIX):
        named_after_target = " (lock=True names the lock after the task target)"
        raise ConfigurationError(
            f"{target}: lock name {name!r} is in the reserved {RESERVED_LOCK_PREFIX!r} "
            "namespace, which holds firefly's own locks such as fire claims"
            f"{named_after_target if name == target else ''}; pass a lock= name that does "
            f"not start with {RESERVED_LOCK_PREFIX!r}"
        )


def _dotted_identifiers(text: str) -> bool:
    # The first test settles most names (no dot) without building a list.
    return text.isidentifier() or all(part.isidentifier() for part in text.split("."))
