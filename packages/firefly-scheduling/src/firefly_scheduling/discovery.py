"""`resolve_descriptors`: which tasks a host or a listing works with, and why.

Resolution order (DESIGN.md §4): explicitly given packages are scanned; otherwise
the compiled manifest is loaded if it exists; otherwise the configured packages
(`FIREFLY_SCAN_PACKAGES`) are scanned; otherwise there are no tasks. The
explanation says which source was used, or why nothing was found, so an empty
schedule is never silent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from firefly_scheduling.descriptor import ScheduledDescriptor
from firefly_scheduling.manifest import ScheduledManifest
from firefly_scheduling.scanner import scan
from firefly_scheduling.settings import Settings, env_var

SCAN_PACKAGES_VARIABLE = env_var("firefly.scan.packages")


class DiscoveredTasks(NamedTuple):
    """The tasks and a sentence saying where they came from (or why there are none)."""

    descriptors: tuple[ScheduledDescriptor, ...]
    explanation: str


def resolve_descriptors(
    settings: Settings | None = None, *, packages: Sequence[str] | None = None
) -> DiscoveredTasks:
    """Find the tasks: `packages` if given, else the manifest, else a scan, else none.

    Raises `ConfigurationError` when a package cannot be imported or the manifest is
    malformed; an absent manifest is not an error.
    """
    settings = Settings.from_env() if settings is None else settings
    if packages:
        return _scanned(packages, "given on the command line")
    path = settings.manifest_path
    if path.is_file():
        manifest = ScheduledManifest.load(path)
        return DiscoveredTasks(
            manifest.descriptors,
            f"{_count(manifest.descriptors)} from the compiled manifest {path}",
        )
    if settings.scan_packages:
        return _scanned(settings.scan_packages, f"from {SCAN_PACKAGES_VARIABLE}")
    return DiscoveredTasks(
        (),
        f"no task found: {SCAN_PACKAGES_VARIABLE} is not set and there is no manifest at "
        f"{path}; set {SCAN_PACKAGES_VARIABLE} to the packages holding your @scheduled "
        "tasks, or compile a manifest with `firefly-scheduling cache`",
    )


def _scanned(packages: Sequence[str], origin: str) -> DiscoveredTasks:
    descriptors = tuple(scan(packages))
    names = ", ".join(packages)
    if not descriptors:
        return DiscoveredTasks(
            (), f"no task found: no @scheduled function or method in {names} ({origin})"
        )
    return DiscoveredTasks(descriptors, f"{_count(descriptors)} from a scan of {names} ({origin})")


def _count(descriptors: Sequence[ScheduledDescriptor]) -> str:
    return f"{len(descriptors)} task{'' if len(descriptors) == 1 else 's'}"
