"""What every `firefly-scheduling` command shares: error handling and the task-source options.

* A `ConfigurationError` raised by any command (a bad cron, an unknown zone, a
  package that fails to import) is printed as `Error: <message>` and exits with
  status 2, without a traceback: it is the operator's input that needs fixing.
* `BackendUnavailable` (the lock backend did not answer at boot within the wait)
  exits with status 3, so that a supervisor can tell "retry later" from "fix it".
* `task_source_options` adds `--app`, `--manifest` and `--path` to a command, and
  `discover_tasks` turns them into tasks, so `schedule`, `cache` and the hosts
  find tasks identically.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, TypeVar

import click

from firefly_scheduling.errors import BackendUnavailable, ConfigurationError
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.discovery import DiscoveredTasks, resolve_descriptors

CONFIGURATION_ERROR_EXIT = 2
BACKEND_UNAVAILABLE_EXIT = 3

Command = TypeVar("Command", bound=Callable[..., Any])


class ConfigurationFailure(click.ClickException):
    """A configuration error reported to the operator: message only, exit status 2."""

    exit_code = CONFIGURATION_ERROR_EXIT


class BackendUnavailableFailure(click.ClickException):
    """The lock backend did not answer at boot: message only, exit status 3."""

    exit_code = BACKEND_UNAVAILABLE_EXIT


def reported(err: Exception) -> click.ClickException:
    """The click error a refusal is reported as: its message, and its exit status."""
    if isinstance(err, BackendUnavailable):
        return BackendUnavailableFailure(str(err))
    return ConfigurationFailure(str(err))


class FireflyGroup(click.Group):
    """A click group that turns refusals into exit 2 (or 3) and loads plugin commands.

    Plugin commands come from an entry-point group and are imported lazily, so an
    installed adapter's dependencies are not loaded for unrelated commands. A
    built-in command always wins over a plugin of the same name.
    """

    def __init__(self, *args: Any, plugin_group: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plugin_group = plugin_group

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._plugins()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        entry_point = self._plugins().get(cmd_name)
        return None if entry_point is None else _load_plugin(entry_point)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ConfigurationError, BackendUnavailable) as err:
            raise reported(err) from err

    def _plugins(self) -> dict[str, EntryPoint]:
        if self.plugin_group is None:
            return {}
        return {point.name: point for point in entry_points(group=self.plugin_group)}


def _load_plugin(entry_point: EntryPoint) -> click.Command:
    """The plugin's command, or a stand-in that reports why it cannot be loaded.

    The stand-in keeps `--help` working when one installed plugin is broken, and
    invoking it exits 2 with the plugin's name and the error.
    """
    origin = entry_point.dist.name if entry_point.dist is not None else entry_point.value
    try:
        command = entry_point.load()
    except Exception as err:  # noqa: BLE001 - any plugin import error becomes a stand-in command
        problem = f"cannot be loaded: {type(err).__name__}: {err}"
    else:
        if isinstance(command, click.Command):
            return command
        problem = f"is not a click command ({entry_point.value})"
    message = f"the command {entry_point.name!r} from {origin} {problem}"

    def unavailable() -> None:
        raise ConfigurationFailure(message)

    return click.Command(
        entry_point.name,
        callback=unavailable,
        help=f"Unavailable: {message}",
        short_help="(unavailable: see --help)",
    )


def task_source_options(command: Command) -> Command:
    """Add `--app`, `--manifest` and `--path`; the command receives `apps`, `manifest`, `paths`."""
    options = (
        click.option(
            "--app",
            "apps",
            multiple=True,
            metavar="PACKAGE",
            help="Package to scan for @scheduled tasks (repeatable). Overrides "
            "FIREFLY_SCAN_PACKAGES and the manifest.",
        ),
        click.option(
            "--manifest",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Compiled manifest to use instead of FIREFLY_SCHEDULING_MANIFEST "
            "(default .firefly/scheduled.json).",
        ),
        click.option(
            "--path",
            "paths",
            multiple=True,
            type=click.Path(file_okay=False, path_type=Path),
            metavar="DIR",
            help="Directory to put on the import path first, e.g. `--path examples` "
            "(repeatable). The current directory is always importable, last.",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def extend_import_path(paths: Sequence[Path]) -> None:
    """Put `paths` first on `sys.path` and the current directory last, as `python -m` would.

    The current directory comes last so that it never shadows an installed package.
    """
    for path in reversed(paths):
        entry = str(path.resolve())
        if entry not in sys.path:
            sys.path.insert(0, entry)
    current = str(Path.cwd())
    if current not in sys.path and "" not in sys.path:
        sys.path.append(current)


def settings_for(manifest: Path | None, settings: Settings | None = None) -> Settings:
    """The environment's settings, with `--manifest` applied."""
    settings = Settings.from_env() if settings is None else settings
    return settings if manifest is None else replace(settings, manifest_path=manifest)


def discover_tasks(
    apps: Sequence[str],
    manifest: Path | None,
    paths: Sequence[Path],
    settings: Settings | None = None,
) -> DiscoveredTasks:
    """The tasks named by the task-source options (see `resolve_descriptors`)."""
    extend_import_path(paths)
    resolved = settings_for(manifest, settings)
    if manifest is not None and not apps and not manifest.is_file():
        raise ConfigurationError(f"no manifest at {manifest}")
    return resolve_descriptors(resolved, packages=list(apps) or None)
