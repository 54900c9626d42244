"""`firefly-scheduling run`: the resident host, one long-lived process per node.

Boot validation happens before the scheduler starts: a bad cron, zone, duration,
lock provider or anchor store, or no task at all, prints the reason and exits 2.
SIGTERM/SIGINT stop new fires, give running bodies `--grace-period` seconds, release
the locks and exit 0 (see `firefly_scheduling.hosts.shutdown`); a signal that comes
while the host boots stops it before the first fire.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from firefly_scheduling.cli.common import discover_tasks, settings_for, task_source_options
from firefly_scheduling.descriptor import ScheduledDescriptor
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.hosts.boot import build_runtime, validated
from firefly_scheduling.hosts.fire_log import FireLog
from firefly_scheduling.hosts.fires import FireObserver
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.shutdown import (
    DEFAULT_GRACE_PERIOD_SECONDS,
    StopRequest,
    ignore_stop_signals,
    stop_on_signals,
)
from firefly_scheduling.settings import Settings

Command = TypeVar("Command", bound=Callable[..., Any])


def host_options(command: Command) -> Command:
    """The options `run` and `tick` share: task source, lock provider, node, grace, logging."""
    options = (
        click.option(
            "--lock-provider",
            default=None,
            metavar="NAME",
            help="Lock provider for this process, overriding FIREFLY_SCHEDULING_LOCK_PROVIDER.",
        ),
        click.option(
            "--node",
            default=None,
            metavar="NAME",
            help="This node's name in logs and records, overriding FIREFLY_SCHEDULING_NODE "
            "[default: hostname-pid].",
        ),
        click.option(
            "--fire-log",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Append one JSON line per fire handled here to this file (debugging, demo).",
        ),
        click.option(
            "--grace-period",
            type=click.FloatRange(min=0),
            default=DEFAULT_GRACE_PERIOD_SECONDS,
            show_default=True,
            help="Seconds running bodies get to finish after SIGTERM/SIGINT.",
        ),
        click.option(
            "--log-level",
            type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
            default="INFO",
            show_default=True,
        ),
    )
    for option in reversed(options):
        command = option(command)
    return task_source_options(command)


def configure_logging(level: str, node: str) -> None:
    """Log lines to stderr, each naming the node.

    APScheduler's own INFO lines (every job added, run and removed) are left out
    unless `--log-level DEBUG`; its warnings (a fire skipped because the previous
    run of the task is still going) stay.
    """
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format=f"%(asctime)s %(levelname)s [{node}] %(name)s: %(message)s",
    )
    if level.upper() != "DEBUG":
        logging.getLogger("apscheduler").setLevel(logging.WARNING)


def prepare_host(
    apps: tuple[str, ...],
    manifest: Path | None,
    paths: tuple[Path, ...],
    lock_provider: str | None,
    node: str | None,
) -> tuple[Settings, tuple[ScheduledDescriptor, ...]]:
    """Settings with the overrides applied, and the validated tasks (none is an error)."""
    settings = settings_for(manifest)
    if lock_provider:
        settings = replace(settings, lock_provider=lock_provider.strip().lower())
    if node:
        settings = replace(settings, node=node)
    discovered = discover_tasks(apps, manifest, paths, settings)
    if not discovered.descriptors:
        raise ConfigurationError(discovered.explanation)
    return settings, validated(discovered.descriptors)


def observers_for(fire_log: Path | None) -> tuple[FireObserver, ...]:
    return () if fire_log is None else (FireLog(fire_log),)


@click.command()
@host_options
def run(
    *,
    apps: tuple[str, ...],
    manifest: Path | None,
    paths: tuple[Path, ...],
    lock_provider: str | None,
    node: str | None,
    fire_log: Path | None,
    log_level: str,
    grace_period: float,
) -> None:
    """Run the tasks in this process until SIGTERM/SIGINT (the resident host)."""
    with stop_on_signals(StopRequest()) as stop:
        settings, descriptors = prepare_host(apps, manifest, paths, lock_provider, node)
        configure_logging(log_level, settings.node)
        runtime = build_runtime(
            descriptors, settings, host="run", observers=observers_for(fire_log)
        )
        host = ResidentHost(descriptors, runtime, grace_period=grace_period, stop=stop)
        status = host.run_until_stopped(handle_signals=False)
    ignore_stop_signals()
    sys.exit(status)
