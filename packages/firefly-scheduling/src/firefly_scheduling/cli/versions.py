"""`firefly-scheduling --version`: the core's version and every installed plugin's.

A bug report needs the version of each distribution in play, and the siblings
(the lock backends) are separate distributions. Core never names them: a plugin
is any installed distribution that registers an entry point in a
`firefly_scheduling.*` group, so the first-party siblings and a third-party
backend are listed the same way.
"""

from __future__ import annotations

from importlib.metadata import distributions

import click

from firefly_scheduling.version import __version__

CORE_DISTRIBUTION = "firefly-scheduling"
PLUGIN_GROUP_PREFIX = "firefly_scheduling."


def installed_versions() -> list[tuple[str, str]]:
    """(distribution, version): the core first, then each plugin distribution by name."""
    plugins: dict[str, tuple[str, str]] = {}
    for distribution in distributions():
        if not any(e.group.startswith(PLUGIN_GROUP_PREFIX) for e in distribution.entry_points):
            continue
        name = distribution.metadata["Name"]
        key = _normalized(name)
        # The first found wins, as on import: a shadowed copy further down the path is ignored.
        if key != _normalized(CORE_DISTRIBUTION):
            plugins.setdefault(key, (name, distribution.version))
    return [(CORE_DISTRIBUTION, __version__), *(plugins[key] for key in sorted(plugins))]


def _normalized(name: str) -> str:
    """A distribution name as PEP 503 compares it: `Firefly_Scheduling` is `firefly-scheduling`."""
    return name.lower().replace("_", "-").replace(".", "-")


def _print_versions(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    for name, version in installed_versions():
        click.echo(f"{name} {version}")
    ctx.exit()


#: `--version` for the command group, answered before any command runs.
version_option = click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_versions,
    help="Show the version of firefly-scheduling and of each installed plugin, then exit.",
)
