"""`firefly-scheduling cache [--check]`: compile the manifest, or check that it is fresh.

Without `--check` it scans the packages (`--app`, else `FIREFLY_SCAN_PACKAGES`) and
writes the manifest atomically; a scan that finds no task writes nothing and exits
2 (a manifest of no task would make every host refuse to start). With `--check` it
writes nothing: it exits 0 when the manifest matches a fresh scan and 1 when it is
missing, unreadable or stale (its tasks, or the fingerprint of its packages'
sources that hosts check at boot), so a CI step or a deploy hook can refuse an
outdated build. Configuration errors (nothing to scan, a package that fails to
import) exit 2.
"""

from __future__ import annotations

from pathlib import Path

import click

from firefly_scheduling.cli.common import extend_import_path, settings_for, task_source_options
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.discovery import SCAN_PACKAGES_VARIABLE
from firefly_scheduling.tasks.manifest import ScheduledManifest
from firefly_scheduling.tasks.scanner import scan, scan_schedulable

STALE_EXIT = 1


@click.command()
@click.option("--check", is_flag=True, help="Exit 1 if the manifest is missing or stale.")
@task_source_options
def cache(
    check: bool, apps: tuple[str, ...], manifest: Path | None, paths: tuple[Path, ...]
) -> None:
    """Compile the @scheduled tasks into the manifest (or check it with --check)."""
    extend_import_path(paths)
    settings = settings_for(manifest)
    path = settings.manifest_path
    packages = list(apps) or list(settings.scan_packages)
    if check:
        _check(path, packages)
        return
    if not packages:
        raise ConfigurationError(
            f"nothing to scan: set {SCAN_PACKAGES_VARIABLE} or pass --app PACKAGE"
        )
    found = scan(packages)
    if not found:
        raise ConfigurationError(
            f"no @scheduled task in {', '.join(packages)}: nothing written to {path}; check "
            "the package names (--app or FIREFLY_SCAN_PACKAGES), and that the tasks are "
            "defined at module or class level in modules below them"
        )
    compiled = ScheduledManifest.compile(
        found, path, packages=packages, schedulable=scan_schedulable(packages)
    )
    click.echo(f"wrote {len(compiled.descriptors)} task(s) from {', '.join(packages)} to {path}")


def _check(path: Path, packages: list[str]) -> None:
    try:
        current = ScheduledManifest.load(path)
    except ConfigurationError as err:
        # Missing, unreadable, another version or a bad value: recompiling fixes it.
        raise click.ClickException(f"{err}; run `firefly-scheduling cache`") from err
    wanted = packages or list(current.packages)
    if not wanted:
        raise ConfigurationError(
            f"nothing to compare {path} with: set {SCAN_PACKAGES_VARIABLE} or pass --app PACKAGE"
        )
    if set(current.packages) != set(wanted):
        raise click.ClickException(
            f"manifest {path} was compiled from {', '.join(current.packages) or 'nothing'}, "
            f"not {', '.join(wanted)}; run `firefly-scheduling cache`"
        )
    reason = current.stale_reason(scan(wanted), scan_schedulable(wanted))
    if reason is not None:
        raise click.ClickException(f"{reason}; run `firefly-scheduling cache`")
    if current.sources_changed():
        raise click.ClickException(
            f"manifest {path} holds the current tasks, but the sources of "
            f"{', '.join(current.packages)} changed after it was compiled, so hosts warn "
            "that it may be stale; run `firefly-scheduling cache`"
        )
    click.echo(f"manifest {path} is up to date ({len(current.descriptors)} task(s))")
