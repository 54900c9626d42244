"""`firefly-scheduling tick`: one pass for crontab or a Kubernetes CronJob, every minute.

Runs every task due in the current minute, repeating sub-minute cadences until the
minute ends, then exits 0. A failing task is logged and does not change the exit
status; a configuration error exits 2 with the message. SIGTERM/SIGINT (a CronJob's
pod deleted, a deadline reached) start no further slot, give running bodies
`--grace-period` seconds, release the locks and exit 0, as `run` does.
"""

from __future__ import annotations

from pathlib import Path

import click

from firefly_scheduling.cli.run import configure_logging, host_options, observers_for, prepare_host
from firefly_scheduling.hosts.boot import build_runtime
from firefly_scheduling.hosts.shutdown import (
    StopRequest,
    exit_abandoning,
    ignore_stop_signals,
    stop_on_signals,
)
from firefly_scheduling.hosts.tick import TickHost


@click.command()
@host_options
def tick(
    *,
    apps: tuple[str, ...],
    manifest: Path | None,
    paths: tuple[Path, ...],
    lock_provider: str | None,
    node: str | None,
    fire_log: Path | None,
    grace_period: float,
    log_level: str,
) -> None:
    """Run what is due in the current minute, then exit (the cron-driven host)."""
    with stop_on_signals(StopRequest()) as stop:
        settings, descriptors = prepare_host(apps, manifest, paths, lock_provider, node)
        configure_logging(log_level, settings.node)
        runtime = build_runtime(
            descriptors, settings, host="tick", observers=observers_for(fire_log)
        )
        host = TickHost(descriptors, runtime, grace_period=grace_period, stop=stop)
        try:
            report = host.run()
        except BaseException:
            runtime.close()
            raise
        if not report.abandoned:
            # Closing the lock would free the task locks of bodies still running.
            runtime.close()
    ignore_stop_signals()
    click.echo(report.summary())
    if report.abandoned:
        exit_abandoning()
