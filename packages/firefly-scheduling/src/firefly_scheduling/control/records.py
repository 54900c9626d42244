"""What the control store keeps: pauses, triggers, backfills and runtime schedules.

Each record is a frozen value that travels as one JSON document, so an adapter
stores opaque text under an opaque key and never parses it: the rules of the
records (who, when, which task, which window) live here once. Keys are SHA-256 hex
digests of a record's identity (`record_key`), 64 ASCII characters whatever the
task's target, so every server holds them as they are, and two nodes that ask for
the same backfill or schedule write the same key. Changes (`Change`) are the audit
trail: one record per operator change, under a random key, never rewritten.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, cast, get_args

from firefly_scheduling.errors import ConfigurationError, FireflySchedulingError
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.validation import validate_descriptor, validate_target

#: The kinds of record, each its own namespace in every adapter.
RecordKind = Literal["pause", "trigger", "backfill", "schedule", "change", "mark"]
KINDS: Final[tuple[RecordKind, ...]] = (
    "pause",
    "trigger",
    "backfill",
    "schedule",
    "change",
    "mark",
)
#: What an operator's change did, as the audit trail names it (`Change.what`).
ChangeKind = Literal["pause", "resume", "trigger", "backfill", "schedule add", "schedule remove"]
#: The task name a fleet-wide pause is kept under (no task target can be `*`).
ALL_TASKS: Final = "*"
#: Longest `by`, `note` and schedule name accepted, in characters.
MAX_TEXT_LENGTH: Final = 1000


class ControlStoreError(FireflySchedulingError):
    """The control store could not be reached or answered with an error.

    The message names the store and a redacted address, never a password.
    """


class ControlRecordError(ControlStoreError):
    """A stored record cannot be read back (written by a newer version, or damaged)."""


class ScheduleConflict(ControlStoreError, ValueError):
    """A runtime schedule of that name exists with other arguments: remove it first."""


def record_key(*parts: str) -> str:
    """The server key of a record: a digest of its identity, the same on every node."""
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Pause:
    """A task (or `ALL_TASKS`) paused by `by` at `since` (epoch seconds, the store's clock).

    `until` is set on a pause that was lifted, at the resume's time: the store keeps a
    task's last paused stretch, so that a fire due inside it but started after the
    resume is still skipped (resume is from now).
    """

    task: str
    by: str
    since: float
    note: str = ""
    until: float | None = None

    @property
    def all_tasks(self) -> bool:
        return self.task == ALL_TASKS

    def holds(self, instant: float) -> bool:
        """Whether `instant` (epoch seconds) falls in this lifted pause's stretch."""
        return self.until is not None and self.since <= instant < self.until


@dataclass(frozen=True)
class PauseState:
    """The pauses in force, and the last lifted stretch of each task that had one."""

    in_force: list[Pause]
    lifted: list[Pause]


@dataclass(frozen=True)
class Trigger:
    """One extra run of `task` asked by `by` at `requested_at`; `id` tells two apart."""

    task: str
    by: str
    requested_at: float
    id: str


@dataclass(frozen=True)
class Backfill:
    """The fires of `task` in `[start, end)` (UTC), asked by `by` at `requested_at`.

    Identified by `(task, start, end)`: asking again for the same window is the same
    request, and keeps the first asker and time.
    """

    task: str
    start: datetime
    end: datetime
    by: str
    requested_at: float

    @property
    def key(self) -> str:
        return record_key(self.task, self.start.isoformat(), self.end.isoformat())


@dataclass(frozen=True)
class RuntimeSchedule:
    """A schedule defined at runtime: `name` -> a validated `ScheduledDescriptor`."""

    name: str
    descriptor: ScheduledDescriptor
    by: str
    added_at: float


@dataclass(frozen=True)
class Change:
    """One operator's change in the audit trail: `what` was done to `task`, by `by`, at `at`.

    `at` is the store's clock (epoch seconds). `detail` says what the change carried
    or found: a pause's note, a trigger's id, a backfill's window, whether a resume
    lifted a pause. A resume deletes its pause, so this trail is its only record.
    """

    what: ChangeKind
    task: str
    by: str
    at: float
    id: str
    detail: str = ""


# -- checks of what an operator asks --------------------------------------------------


#: A runtime schedule's name: what its task is named (no target has it, as it has no `:`).
RUNTIME_SCHEDULE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def is_runtime_schedule_name(name: object) -> bool:
    """Whether `name` has the shape of a runtime schedule's name (`RUNTIME_SCHEDULE_NAME`)."""
    return isinstance(name, str) and RUNTIME_SCHEDULE_NAME.fullmatch(name) is not None


def checked_task(task: object, *, allow_all: bool = False, schedule_names: bool = False) -> str:
    """`task` if it is a task target (or `ALL_TASKS` where allowed, or a runtime
    schedule's name, the name of its task, where `schedule_names`), else a
    `ConfigurationError` naming it."""
    if allow_all and task == ALL_TASKS:
        return ALL_TASKS
    if schedule_names and is_runtime_schedule_name(task):
        return str(task)
    try:
        return validate_target(task)
    except ConfigurationError as err:
        if not schedule_names:
            raise
        raise ConfigurationError(
            f"{err}; nor is {task!r} a runtime schedule's name (letters, digits, '.', '_' "
            "or '-', starting with a letter or digit)"
        ) from err


def checked_text(value: object, what: str, *, required: bool) -> str:
    """`value` as given, if it is a string short enough (and non-blank when `required`)."""
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} must be a str, got {value!r}")
    if required and not value.strip():
        raise ConfigurationError(f"{what} must not be empty, got {value!r}")
    if len(value) > MAX_TEXT_LENGTH or "\x00" in value:
        raise ConfigurationError(
            f"{what} must be at most {MAX_TEXT_LENGTH} characters with no NUL, "
            f"got {len(value)} characters"
        )
    return value


def checked_window(start: object, end: object) -> tuple[datetime, datetime]:
    """`[start, end)` as aware UTC datetimes, `start` before `end`; refused otherwise."""
    for label, value in (("start", start), ("end", end)):
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise ConfigurationError(
                f"a backfill's {label} must be a timezone-aware datetime, got {value!r}"
            )
    assert isinstance(start, datetime)  # checked just above
    assert isinstance(end, datetime)
    start_utc, end_utc = start.astimezone(UTC), end.astimezone(UTC)
    if not start_utc < end_utc:
        raise ConfigurationError(
            f"a backfill's window [start, end) must not be empty: start {start_utc.isoformat()} "
            f"is not before end {end_utc.isoformat()}"
        )
    return start_utc, end_utc


def checked_schedule(name: object, descriptor: object) -> tuple[str, ScheduledDescriptor]:
    """The schedule's name and its descriptor, validated as a `@scheduled` task at boot is."""
    name = checked_text(name, "a runtime schedule's name", required=True)
    if not isinstance(descriptor, ScheduledDescriptor):
        raise ConfigurationError(
            f"runtime schedule {name!r} must be a ScheduledDescriptor, got {descriptor!r}"
        )
    try:
        return name, validate_descriptor(descriptor)
    except ConfigurationError as err:
        raise ConfigurationError(f"runtime schedule {name!r}: {err}") from err


# -- the JSON of each record ----------------------------------------------------------


def encode(record: Pause | Trigger | Backfill | RuntimeSchedule | Change) -> str:
    """The record as compact JSON (keys sorted, so equal records are equal text)."""
    if isinstance(record, Backfill):
        document: dict[str, Any] = {
            "task": record.task,
            "start": record.start.isoformat(),
            "end": record.end.isoformat(),
            "by": record.by,
            "requested_at": record.requested_at,
        }
    elif isinstance(record, RuntimeSchedule):
        document = {
            "name": record.name,
            "descriptor": descriptor_fields(record.descriptor),
            "by": record.by,
            "added_at": record.added_at,
        }
    else:
        document = dataclasses.asdict(record)
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def descriptor_fields(descriptor: ScheduledDescriptor) -> dict[str, Any]:
    """The descriptor's set fields, as the manifest writes a schedule (None left out)."""
    return {
        field.name: getattr(descriptor, field.name)
        for field in dataclasses.fields(descriptor)
        if getattr(descriptor, field.name) is not None
    }


def decode_pause(text: str) -> Pause:
    document = _document(text, "pause")
    return Pause(
        task=_str(document, "task"),
        by=_str(document, "by"),
        since=_seconds(document, "since"),
        note=_str(document, "note"),
        until=None if document.get("until") is None else _seconds(document, "until"),
    )


def decode_trigger(text: str) -> Trigger:
    document = _document(text, "trigger")
    return Trigger(
        task=_str(document, "task"),
        by=_str(document, "by"),
        requested_at=_seconds(document, "requested_at"),
        id=_str(document, "id"),
    )


def decode_change(text: str) -> Change:
    document = _document(text, "change")
    what = _str(document, "what")
    if what not in get_args(ChangeKind):
        raise ControlRecordError(f"a stored change has an unknown kind: {what!r}")
    return Change(
        what=cast(ChangeKind, what),
        task=_str(document, "task"),
        by=_str(document, "by"),
        at=_seconds(document, "at"),
        id=_str(document, "id"),
        detail=_str(document, "detail"),
    )


def decode_backfill(text: str) -> Backfill:
    document = _document(text, "backfill")
    try:
        start = datetime.fromisoformat(_str(document, "start"))
        end = datetime.fromisoformat(_str(document, "end"))
    except ValueError as err:
        raise ControlRecordError(f"a stored backfill has an unreadable window: {err}") from err
    return Backfill(
        task=_str(document, "task"),
        start=start,
        end=end,
        by=_str(document, "by"),
        requested_at=_seconds(document, "requested_at"),
    )


def decode_schedule(text: str) -> RuntimeSchedule:
    document = _document(text, "runtime schedule")
    name = _str(document, "name")
    fields = document.get("descriptor")
    if not isinstance(fields, dict):
        raise ControlRecordError(f"stored runtime schedule {name!r} has no descriptor")
    try:
        descriptor = validate_descriptor(ScheduledDescriptor(**fields))
    except (TypeError, ConfigurationError) as err:
        raise ControlRecordError(
            f"stored runtime schedule {name!r} cannot be read back: {err}"
        ) from err
    return RuntimeSchedule(
        name=name,
        descriptor=descriptor,
        by=_str(document, "by"),
        added_at=_seconds(document, "added_at"),
    )


def _document(text: str, kind: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except ValueError as err:
        raise ControlRecordError(f"a stored {kind} record is not JSON: {err}") from err
    if not isinstance(document, dict):
        raise ControlRecordError(f"a stored {kind} record is not a JSON object")
    return document


def _str(document: dict[str, Any], name: str) -> str:
    value = document.get(name)
    if not isinstance(value, str):
        raise ControlRecordError(f"a stored control record's {name!r} is not text: {value!r}")
    return value


def _seconds(document: dict[str, Any], name: str) -> float:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ControlRecordError(f"a stored control record's {name!r} is not a time: {value!r}")
    return float(value)
