"""`resolve_descriptors`: which tasks a host or a listing works with, and why.

Resolution order: explicitly given packages are scanned; otherwise
the compiled manifest is loaded if it exists; otherwise the configured packages
(`FIREFLY_SCAN_PACKAGES`) are scanned; otherwise there are no tasks. The
explanation says which source was used and what it passed over (a manifest beside
`--app`, `FIREFLY_SCAN_PACKAGES` beside a manifest), or why nothing was found and
what to do, so an empty schedule is never silent. Every host logs it at boot as
`tasks: <explanation>`.

A manifest never wins in silence when it may be stale: when the sources of the
packages it was compiled from changed since (`ScheduledManifest.sources_changed`),
or when `FIREFLY_SCAN_PACKAGES` names other packages than it was compiled from, a
WARNING names the manifest and `firefly-scheduling cache`; under
`firefly.scheduling.strict` it is a `ConfigurationError`. It still wins otherwise:
it exists so that a node boots without importing every task module, and checking it
reads files but imports nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.settings import STRICT_KEY, Settings, env_var
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.manifest import ScheduledManifest
from firefly_scheduling.tasks.scanner import scan, scan_schedulable

logger = logging.getLogger("firefly_scheduling.tasks.discovery")

SCAN_PACKAGES_VARIABLE = env_var("firefly.scan.packages")
REFRESH = "run `firefly-scheduling cache` to recompile it"


class DiscoveredTasks(NamedTuple):
    """The tasks and a sentence saying where they came from (or why there are none)."""

    descriptors: tuple[ScheduledDescriptor, ...]
    explanation: str


def resolve_descriptors(
    settings: Settings | None = None, *, packages: Sequence[str] | None = None
) -> DiscoveredTasks:
    """Find the tasks: `packages` if given, else the manifest, else a scan, else none.

    Logs the explanation at INFO (`tasks: ...`), and a manifest that may be stale at
    WARNING. Raises `ConfigurationError` when a package cannot be imported, the
    manifest is malformed, or it may be stale under `firefly.scheduling.strict`; an
    absent manifest is not an error.
    """
    settings = Settings.from_env() if settings is None else settings
    discovered = _resolved(settings, packages)
    logger.info("tasks: %s", discovered.explanation)
    return discovered


def runtime_targets(
    settings: Settings | None = None, *, packages: Sequence[str] | None = None
) -> frozenset[str]:
    """The targets a runtime schedule may name: the tasks and the `@schedulable` callables
    of the source `resolve_descriptors` uses (`packages`, else the manifest, else a scan).

    A scan imports the packages again (each module once per process); a manifest
    lists the `@schedulable` targets `cache` found.
    """
    settings = Settings.from_env() if settings is None else settings
    path = settings.manifest_path
    if packages:
        tasks, allowed = scan(packages), scan_schedulable(packages)
    elif path.is_file():
        manifest = ScheduledManifest.load(path)
        tasks, allowed = list(manifest.descriptors), list(manifest.schedulable)
    elif settings.scan_packages:
        tasks = scan(settings.scan_packages)
        allowed = scan_schedulable(settings.scan_packages)
    else:
        return frozenset()
    return frozenset(allowed) | {descriptor.target for descriptor in tasks}


def _resolved(settings: Settings, packages: Sequence[str] | None) -> DiscoveredTasks:
    path = settings.manifest_path
    if packages:
        passed_over = f"; the manifest {path} is ignored" if path.is_file() else ""
        return _scanned(packages, "given on the command line", passed_over)
    if path.is_file():
        return _from_manifest(ScheduledManifest.load(path), settings)
    if settings.scan_packages:
        return _scanned(settings.scan_packages, f"from {SCAN_PACKAGES_VARIABLE}", "")
    return DiscoveredTasks(
        (),
        f"no task found: {SCAN_PACKAGES_VARIABLE} is not set and there is no manifest at "
        f"{path}; set {SCAN_PACKAGES_VARIABLE} to the packages holding your @scheduled "
        "tasks, or compile a manifest with `firefly-scheduling cache`",
    )


def _from_manifest(manifest: ScheduledManifest, settings: Settings) -> DiscoveredTasks:
    compiled_from = ", ".join(manifest.packages) or "descriptors given to it"
    configured = ", ".join(settings.scan_packages)
    if not manifest.descriptors:
        return DiscoveredTasks(
            (),
            f"no task found: the manifest {manifest.path} holds no task (compiled from "
            f"{compiled_from}); add @scheduled tasks and {REFRESH}, or delete it to scan "
            f"{SCAN_PACKAGES_VARIABLE}",
        )
    _warn_if_stale(manifest, settings)
    ignored = (
        f"; {SCAN_PACKAGES_VARIABLE}={configured} is ignored while the manifest exists "
        f"({REFRESH} after changing the tasks)"
        if configured
        else ""
    )
    return DiscoveredTasks(
        manifest.descriptors,
        f"{_count(manifest.descriptors)} from the compiled manifest {manifest.path} "
        f"(compiled from {compiled_from}){ignored}",
    )


def _warn_if_stale(manifest: ScheduledManifest, settings: Settings) -> None:
    """A WARNING (a refusal under strict) when `manifest` may not hold today's tasks."""
    reasons = []
    if settings.scan_packages and set(settings.scan_packages) != set(manifest.packages):
        reasons.append(
            f"it was compiled from {', '.join(manifest.packages) or 'no package'} but "
            f"{SCAN_PACKAGES_VARIABLE} names {', '.join(settings.scan_packages)}"
        )
    if manifest.sources_changed():
        reasons.append(
            f"the sources of {', '.join(manifest.packages)} changed after it was compiled "
            "(a task added since would not run)"
        )
    if not reasons:
        return
    problem = f"the manifest {manifest.path} may be stale: {'; '.join(reasons)}; {REFRESH}"
    if settings.strict:
        raise ConfigurationError(
            f"{problem} ({env_var(STRICT_KEY)} is set, so a stale manifest is refused)"
        )
    logger.warning("%s (%s=true refuses to start on it)", problem, env_var(STRICT_KEY))


def _scanned(packages: Sequence[str], origin: str, passed_over: str) -> DiscoveredTasks:
    descriptors = tuple(scan(packages))
    names = ", ".join(packages)
    if not descriptors:
        return DiscoveredTasks(
            (),
            f"no task found: no @scheduled function or method in {names} ({origin}); "
            "check the package names, and that the tasks are defined at module or class "
            "level in modules below them",
        )
    return DiscoveredTasks(
        descriptors, f"{_count(descriptors)} from a scan of {names} ({origin}){passed_over}"
    )


def _count(descriptors: Sequence[ScheduledDescriptor]) -> str:
    return f"{len(descriptors)} task{'' if len(descriptors) == 1 else 's'}"
