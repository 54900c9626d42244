"""`firefly-scheduling run`: the resident host, one long-lived process per node.

Boot validation happens before the scheduler starts: a bad cron, zone, duration,
lock provider or anchor store, or no task at all, prints the reason and exits 2.
SIGTERM/SIGINT stop new fires, give running bodies `--grace-period` seconds, release
the locks and exit 0 (see `firefly_scheduling.hosts.shutdown`); a signal that comes
while the host boots stops it before the first fire.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from firefly_scheduling.cli.host_options import (
    configure_logging,
    host_options,
    observers_for,
    prepare_host,
)
from firefly_scheduling.hosts.boot import build_runtime
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.shutdown import StopRequest, ignore_stop_signals, stop_on_signals


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
    log_format: str,
    grace_period: float,
) -> None:
    """Run the tasks in this process until SIGTERM/SIGINT (the resident host)."""
    with stop_on_signals(StopRequest()) as stop:
        settings, descriptors = prepare_host(apps, manifest, paths, lock_provider, node)
        configure_logging(log_level, settings.node, log_format)
        runtime = build_runtime(
            descriptors, settings, host="run", observers=observers_for(fire_log)
        )
        host = ResidentHost(descriptors, runtime, grace_period=grace_period, stop=stop)
        status = host.run_until_stopped(handle_signals=False)
    ignore_stop_signals()
    sys.exit(status)
