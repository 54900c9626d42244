"""`ScheduledManifest`: the scanned tasks, compiled to a versioned JSON file.

A host that starts from the manifest imports no application module to learn its
schedule (a task's module is imported when it first runs), so a cold start with
thousands of tasks costs one JSON read plus boot validation.

The file is written atomically (temporary file in the same directory, fsync,
`os.replace`), so a reader never sees half a manifest. It holds no timestamp: the
same tasks always compile to the same bytes. Format, version 1::

    {"format": "firefly-scheduling-manifest", "version": 1,
     "packages": ["app.tasks"],
     "tasks": [{"target": "app.tasks:report", "cron": "0 3 * * *", ...}, ...]}

A task object lists only its non-null fields.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from firefly_scheduling.descriptor import ScheduledDescriptor
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.validation import validate_descriptor

FORMAT = "firefly-scheduling-manifest"
VERSION = 1
_FIELDS = tuple(field.name for field in fields(ScheduledDescriptor))
_FIELD_SET = frozenset(_FIELDS)


@dataclass(frozen=True)
class ScheduledManifest:
    """The tasks of a compiled manifest, validated, in target order."""

    path: Path
    descriptors: tuple[ScheduledDescriptor, ...]
    #: The packages that were scanned to compile it (used by `cache --check`).
    packages: tuple[str, ...] = ()

    @classmethod
    def compile(
        cls,
        descriptors: Iterable[ScheduledDescriptor],
        path: str | os.PathLike[str],
        *,
        packages: Sequence[str] = (),
    ) -> ScheduledManifest:
        """Validate `descriptors` and write them to `path` atomically; return the manifest."""
        tasks = _sorted_unique(validate_descriptor(descriptor) for descriptor in descriptors)
        manifest = cls(Path(path), tasks, tuple(packages))
        _write_atomically(manifest.path, manifest.to_json())
        return manifest

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ScheduledManifest:
        """Read and validate the manifest at `path`; imports no application module.

        Raises `ConfigurationError` naming the path for a missing, unreadable or
        malformed file or an unknown version, and naming the task for a bad value.
        """
        location = Path(path)
        try:
            document = json.loads(location.read_bytes())
        except FileNotFoundError as err:
            raise ConfigurationError(f"no manifest at {location}") from err
        except (OSError, ValueError) as err:
            raise ConfigurationError(f"manifest {location} cannot be read: {err}") from err
        try:
            packages, raw_tasks = _parse_document(document)
            descriptors = tuple(_descriptor(raw) for raw in raw_tasks)
        except ConfigurationError as err:
            raise ConfigurationError(f"manifest {location}: {err}") from err
        except (TypeError, ValueError, KeyError) as err:
            raise ConfigurationError(f"manifest {location} is malformed: {err}") from err
        targets = [descriptor.target for descriptor in descriptors]
        if targets != sorted(set(targets)):
            raise ConfigurationError(
                f"manifest {location} is malformed: tasks are not unique and sorted by target"
            )
        return cls(location, descriptors, packages)

    def to_json(self) -> str:
        """The manifest's exact file content."""
        document = {
            "format": FORMAT,
            "version": VERSION,
            "packages": list(self.packages),
            "tasks": [_task_object(descriptor) for descriptor in self.descriptors],
        }
        return json.dumps(document, indent=1, ensure_ascii=False) + "\n"

    def stale_reason(self, fresh: Iterable[ScheduledDescriptor]) -> str | None:
        """Why this manifest differs from a fresh scan's `fresh` tasks, or None if it matches."""
        current = {descriptor.target: descriptor for descriptor in self.descriptors}
        scanned = {
            descriptor.target: descriptor
            for descriptor in (validate_descriptor(item) for item in fresh)
        }
        added = sorted(scanned.keys() - current.keys())
        removed = sorted(current.keys() - scanned.keys())
        changed = sorted(
            target
            for target in scanned.keys() & current.keys()
            if scanned[target] != current[target]
        )
        if not (added or removed or changed):
            return None
        parts = [
            f"{label} {', '.join(targets[:3])}{' ...' if len(targets) > 3 else ''}"
            for label, targets in (("added:", added), ("removed:", removed), ("changed:", changed))
            if targets
        ]
        return f"manifest {self.path} is stale ({'; '.join(parts)})"


def _sorted_unique(descriptors: Iterable[ScheduledDescriptor]) -> tuple[ScheduledDescriptor, ...]:
    by_target: dict[str, ScheduledDescriptor] = {}
    for descriptor in descriptors:
        if by_target.setdefault(descriptor.target, descriptor) != descriptor:
            raise ConfigurationError(f"two different tasks share the target {descriptor.target}")
    return tuple(by_target[target] for target in sorted(by_target))


def _task_object(descriptor: ScheduledDescriptor) -> dict[str, Any]:
    return {
        name: getattr(descriptor, name) for name in _FIELDS if getattr(descriptor, name) is not None
    }


def _parse_document(document: object) -> tuple[tuple[str, ...], list[Any]]:
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"it is not a firefly-scheduling manifest (no format {FORMAT!r})")
    version = document.get("version")
    if version != VERSION:
        raise ValueError(
            f"unknown version {version!r}; this firefly-scheduling reads version {VERSION}: "
            "recompile it with `firefly-scheduling cache`"
        )
    packages, tasks = document.get("packages", []), document.get("tasks")
    if not isinstance(tasks, list):
        raise ValueError("'tasks' must be a list")
    if not isinstance(packages, list) or not all(isinstance(item, str) for item in packages):
        raise ValueError("'packages' must be a list of package names")
    return tuple(packages), tasks


def _descriptor(raw: object) -> ScheduledDescriptor:
    if not isinstance(raw, dict):
        raise TypeError(f"a task must be an object, got {raw!r}")
    unknown = raw.keys() - _FIELD_SET
    if unknown:
        raise ValueError(f"task {raw.get('target')!r} has unknown fields {sorted(unknown)}")
    if "target" not in raw:
        raise ValueError(f"a task has no target: {raw!r}")
    return validate_descriptor(ScheduledDescriptor(**raw))


def _write_atomically(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates the file 0600; a manifest is not secret and other users read it.
        Path(temporary).chmod(0o644)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(content)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not possible (nor needed) on every platform.
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
