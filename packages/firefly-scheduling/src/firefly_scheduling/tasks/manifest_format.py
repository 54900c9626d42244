"""The manifest's JSON format (version 1): encoding, and decoding with boot validation.

Thousands of tasks share a handful of schedules, so the format stores each
distinct schedule (trigger, zone, durations, lock TTL) once, and each task as a
row naming its target, its schedule and its lock::

    {"format": "firefly-scheduling-manifest", "version": 1, "packages": ["app"],
     "sources": "sha256:9f2c...",
     "schedules": [
    {"fixed_rate":30.0,"lock_ttl":30.0},
    {"cron":"0 3 * * *","zone":"Europe/Paris"}
    ],
     "tasks": [
    ["app.reports:nightly",1,null],
    ["app.reports:refresh",0,true],
    ["app.sync:pull",0,"shared-sync"]
    ]}

`schedulable` (present only when there are some) lists the targets of the
`@schedulable` callables the scan found: the callables runtime schedules may name
besides the tasks (`tasks.schedulable`); a reader that predates it ignores it.
`sources` is the fingerprint of the scanned packages' source files
(`manifest_sources`), by which a host tells that they changed after compiling; a
manifest without it (compiled by an older version, or from descriptors alone) is
read as well, and its freshness is not checked. A task's lock is `null`
(unlocked), `true` (the lock is named after the target, as `lock=True` does) or an
explicit lock name. Tasks are sorted by target, one per
line, so a diff of two manifests reads task by task.

Decoding validates a schedule once, with the first task that uses it (which the
error then names), and every task's target and lock name; that keeps loading ten
thousand tasks within tens of milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import DescriptorValidator, validate_target

FORMAT = "firefly-scheduling-manifest"
VERSION = 1
SCHEDULE_FIELDS = (
    "cron",
    "zone",
    "dst_gap",
    "dst_fold",
    "fixed_rate",
    "fixed_delay",
    "initial_delay",
    "lock_ttl",
    "jitter",
    "timeout",
    "retries",
    "retry_backoff",
    "retry_backoff_max",
    "overlap",
    "catchup",
    "catchup_limit",
)
_SCHEDULE_FIELD_SET = frozenset(SCHEDULE_FIELDS)
# Descriptors may be built without __init__ only while __init__ merely assigns fields.
_DIRECT_CONSTRUCTION = not hasattr(ScheduledDescriptor, "__post_init__") and not hasattr(
    ScheduledDescriptor, "__slots__"
)


def encode(
    descriptors: Sequence[ScheduledDescriptor],
    packages: Sequence[str],
    sources: str | None = None,
    schedulable: Sequence[str] = (),
) -> str:
    """The file content for `descriptors` (already validated, sorted and unique) and the
    `schedulable` targets (sorted)."""
    schedules: dict[tuple[tuple[str, Any], ...], int] = {}
    rows = []
    for descriptor in descriptors:
        schedule = tuple(
            (name, getattr(descriptor, name))
            for name in SCHEDULE_FIELDS
            if getattr(descriptor, name) is not None
        )
        index = schedules.setdefault(schedule, len(schedules))
        lock = True if descriptor.lock_name == descriptor.target else descriptor.lock_name
        rows.append([descriptor.target, index, lock])
    header: dict[str, object] = {"format": FORMAT, "version": VERSION, "packages": list(packages)}
    if sources is not None:
        header["sources"] = sources
    if schedulable:
        header["schedulable"] = list(schedulable)
    head = json.dumps(header, ensure_ascii=False)
    return (
        f'{head[:-1]},\n "schedules": [\n{_lines(dict(schedule) for schedule in schedules)}\n],\n'
        f' "tasks": [\n{_lines(rows)}\n]}}\n'
    )


def decode(document: object) -> tuple[tuple[str, ...], tuple[ScheduledDescriptor, ...]]:
    """The packages and validated descriptors of a parsed manifest document (`sources` apart).

    Raises `ValueError`/`TypeError` for a malformed document and `ConfigurationError`
    naming the task for an invalid value; the caller adds the path.
    """
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"it is not a firefly-scheduling manifest (no format {FORMAT!r})")
    version = document.get("version")
    if version != VERSION:
        raise ValueError(
            f"unknown version {version!r}; this firefly-scheduling reads version {VERSION}: "
            "recompile it with `firefly-scheduling cache`"
        )
    packages = document.get("packages", [])
    if not isinstance(packages, list) or not all(isinstance(item, str) for item in packages):
        raise ValueError("'packages' must be a list of package names")
    schedules = [_schedule(raw) for raw in _list(document, "schedules")]
    return tuple(packages), _tasks(_list(document, "tasks"), schedules)


def decode_sources(document: dict[str, object]) -> str | None:
    """The `sources` fingerprint of a parsed manifest document, if it records one."""
    sources = document.get("sources")
    if sources is not None and not isinstance(sources, str):
        raise ValueError("'sources' must be a fingerprint string")
    return sources


def decode_schedulable(document: dict[str, object]) -> tuple[str, ...]:
    """The `@schedulable` targets of a parsed manifest document (none when it lists none)."""
    targets = document.get("schedulable", [])
    if not isinstance(targets, list) or not all(isinstance(item, str) for item in targets):
        raise ValueError("'schedulable' must be a list of task targets")
    return tuple(validate_target(target) for target in targets)


def _tasks(rows: list[Any], schedules: list[dict[str, Any]]) -> tuple[ScheduledDescriptor, ...]:
    validator = DescriptorValidator()
    # (schedule index, unlocked) -> the normalised schedule fields, once validated
    prepared: dict[tuple[int, bool], dict[str, Any]] = {}
    descriptors = []
    for row in rows:
        if type(row) is not list or len(row) != 3:
            raise ValueError(f"a task must be [target, schedule, lock], got {row!r}")
        target, index, lock = row
        if type(index) is not int or not 0 <= index < len(schedules):
            raise ValueError(f"task {target!r} names no schedule: {index!r}")
        if lock is not None and lock is not True and type(lock) is not str:
            raise ValueError(f"task {target!r}: lock must be null, true or a name, got {lock!r}")
        lock_name = target if lock is True else lock
        known = prepared.get((index, lock_name is None))
        if known is None:
            descriptor = validator.validate(
                _build({**schedules[index], "target": target, "lock_name": lock_name})
            )
            prepared[index, lock_name is None] = {
                name: getattr(descriptor, name) for name in SCHEDULE_FIELDS
            }
        else:
            validator.validate_identity(target, lock_name)
            descriptor = _build({**known, "target": target, "lock_name": lock_name})
        descriptors.append(descriptor)
    return tuple(descriptors)


def _schedule(raw: object) -> dict[str, Any]:
    if type(raw) is not dict:
        raise TypeError(f"a schedule must be an object, got {raw!r}")
    if not raw.keys() <= _SCHEDULE_FIELD_SET:
        raise ValueError(
            f"a schedule has unknown fields {sorted(raw.keys() - _SCHEDULE_FIELD_SET)}"
        )
    return {**dict.fromkeys(SCHEDULE_FIELDS), **raw}


def _build(fields_of_task: dict[str, Any]) -> ScheduledDescriptor:
    """A descriptor from all of its fields (`fields_of_task` is taken over, not copied)."""
    if not _DIRECT_CONSTRUCTION:
        return ScheduledDescriptor(**fields_of_task)
    # A frozen dataclass's __init__ assigns field by field through object.__setattr__,
    # most of the cost of loading thousands of tasks, and does nothing else; filling
    # the instance dict directly builds an equal object.
    descriptor = object.__new__(ScheduledDescriptor)
    object.__setattr__(descriptor, "__dict__", fields_of_task)
    return descriptor


def _list(document: dict[str, Any], key: str) -> list[Any]:
    value = document.get(key)
    if not isinstance(value, list):
        raise ValueError(f"{key!r} must be a list")
    return value


def _lines(items: Any) -> str:
    return ",\n".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in items)
