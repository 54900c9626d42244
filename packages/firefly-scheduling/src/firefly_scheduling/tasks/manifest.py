"""`ScheduledManifest`: the scanned tasks, compiled to a versioned JSON file.

A host that starts from the manifest imports no application module to learn its
schedule (a task's module is imported when it first runs), so a cold start with
thousands of tasks costs one JSON read plus boot validation.

The file is written atomically (temporary file in the same directory, fsync,
`os.replace`), so a reader never sees half a manifest. It holds no timestamp: the
same sources always compile to the same bytes. It holds the fingerprint of the
scanned packages' sources (`manifest_sources`), so a host can tell that a package
changed after it was compiled (`sources_changed`). The format is described in
`firefly_scheduling.tasks.manifest_format`.
"""

from __future__ import annotations

import gc
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.manifest_format import (
    decode,
    decode_schedulable,
    decode_sources,
    encode,
)
from firefly_scheduling.tasks.manifest_sources import source_fingerprint
from firefly_scheduling.tasks.validation import validate_descriptors, validate_target


@dataclass(frozen=True)
class ScheduledManifest:
    """The tasks of a compiled manifest, validated, in target order."""

    path: Path
    descriptors: tuple[ScheduledDescriptor, ...]
    #: The packages that were scanned to compile it (used by `cache --check`).
    packages: tuple[str, ...] = ()
    #: The fingerprint of those packages' sources when it was compiled, if known.
    sources: str | None = None
    #: The targets of the `@schedulable` callables found, sorted (`tasks.schedulable`).
    schedulable: tuple[str, ...] = ()

    @classmethod
    def compile(
        cls,
        descriptors: Iterable[ScheduledDescriptor],
        path: str | os.PathLike[str],
        *,
        packages: Sequence[str] = (),
        schedulable: Iterable[str] = (),
    ) -> ScheduledManifest:
        """Validate `descriptors` and write them to `path` atomically; return the manifest.

        The fingerprint of `packages`' sources is recorded with them, when found, and
        the `schedulable` targets (the `@schedulable` callables of the scan).
        """
        tasks = _sorted_unique(validate_descriptors(descriptors))
        sources = source_fingerprint(packages) if packages else None
        allowed = tuple(sorted({validate_target(target) for target in schedulable}))
        manifest = cls(Path(path), tasks, tuple(packages), sources, allowed)
        _write_atomically(manifest.path, manifest.to_json())
        return manifest

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ScheduledManifest:
        """Read and validate the manifest at `path`; imports no application module.

        Raises `ConfigurationError` naming the path for a missing, unreadable or
        malformed file or an unknown version, and naming the task for a bad value.
        """
        location = Path(path)
        with _collector_paused():
            return cls._load(location)

    @classmethod
    def _load(cls, location: Path) -> ScheduledManifest:
        try:
            document = json.loads(location.read_bytes())
        except FileNotFoundError as err:
            raise ConfigurationError(f"no manifest at {location}") from err
        except (OSError, ValueError) as err:
            raise ConfigurationError(f"manifest {location} cannot be read: {err}") from err
        try:
            packages, descriptors = decode(document)
            sources = decode_sources(document)
            schedulable = decode_schedulable(document)
        except ConfigurationError as err:
            raise ConfigurationError(f"manifest {location}: {err}") from err
        except (TypeError, ValueError) as err:
            raise ConfigurationError(f"manifest {location} is malformed: {err}") from err
        targets = [descriptor.target for descriptor in descriptors]
        if targets != sorted(set(targets)):
            raise ConfigurationError(
                f"manifest {location} is malformed: tasks are not unique and sorted by target"
            )
        return cls(location, descriptors, packages, sources, schedulable)

    def to_json(self) -> str:
        """The manifest's exact file content."""
        return encode(self.descriptors, self.packages, self.sources, self.schedulable)

    def sources_changed(self) -> bool:
        """Whether its packages' sources differ from when it was compiled (reads, never imports).

        False when that cannot be told: no fingerprint recorded, or the sources not found.
        """
        if self.sources is None or not self.packages:
            return False
        now = source_fingerprint(self.packages)
        return now is not None and now != self.sources

    def stale_reason(
        self, fresh: Iterable[ScheduledDescriptor], schedulable: Iterable[str] = ()
    ) -> str | None:
        """Why this manifest differs from a fresh scan's `fresh` tasks and `schedulable`
        targets, or None if it matches."""
        current = {descriptor.target: descriptor for descriptor in self.descriptors}
        scanned = {descriptor.target: descriptor for descriptor in validate_descriptors(fresh)}
        added = sorted(scanned.keys() - current.keys())
        removed = sorted(current.keys() - scanned.keys())
        changed = sorted(
            target
            for target in scanned.keys() & current.keys()
            if scanned[target] != current[target]
        )
        allowed = set(schedulable)
        now_schedulable = sorted(allowed - set(self.schedulable))
        no_longer = sorted(set(self.schedulable) - allowed)
        if not (added or removed or changed or now_schedulable or no_longer):
            return None
        parts = [
            f"{label} {', '.join(targets[:3])}{' ...' if len(targets) > 3 else ''}"
            for label, targets in (
                ("added:", added),
                ("removed:", removed),
                ("changed:", changed),
                ("@schedulable added:", now_schedulable),
                ("@schedulable removed:", no_longer),
            )
            if targets
        ]
        return f"manifest {self.path} is stale ({'; '.join(parts)})"


def _sorted_unique(descriptors: Iterable[ScheduledDescriptor]) -> tuple[ScheduledDescriptor, ...]:
    by_target: dict[str, ScheduledDescriptor] = {}
    for descriptor in descriptors:
        if by_target.setdefault(descriptor.target, descriptor) != descriptor:
            raise ConfigurationError(f"two different tasks share the target {descriptor.target}")
    return tuple(by_target[target] for target in sorted(by_target))


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while thousands of acyclic objects are built.

    Each batch of new containers would otherwise trigger a collection pass over
    everything allocated so far, for nothing: the manifest holds no cycle.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
