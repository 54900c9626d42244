"""`firefly-scheduling run`: the resident host, one long-lived process per node.

Boot validation happens before the scheduler starts (`hosts.runtime.boot`): a bad cron,
zone, duration, lock provider or anchor store, a method task whose object cannot be
built, or no task at all, prints the reason and exits 2; a lock backend that does
not answer within `--wait-for-backend` seconds exits 3.
SIGTERM/SIGINT stop new fires, give running bodies `--grace-period` seconds, release
the locks and exit 0 (see `firefly_scheduling.hosts.runtime.shutdown`); a signal that comes
while the host boots stops it before the first fire.

`--health-port N` serves `/livez` and `/readyz` on that port (`hosts.observation.health`), from
the boot on, for Kubernetes probes.
"""

from __future__ import annotations

import sys

import click

from firefly_scheduling.cli.host_options import HostOptions, host_options
from firefly_scheduling.hosts.observation.health import Heartbeat, threaded_host_health
from firefly_scheduling.hosts.observation.health_server import HealthServer
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.shutdown import (
    StopRequest,
    ignore_stop_signals,
    stop_on_signals,
)
from firefly_scheduling.hosts.runtime.workers import RESIDENT_MAX_WORKERS


@click.command()
@host_options(worker_ceiling=RESIDENT_MAX_WORKERS)
@click.option(
    "--health-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    metavar="N",
    help="Serve /livez (the scheduler woke on time) and /readyz (the lock backend and "
    "the history answer) over HTTP on this port.",
)
@click.option(
    "--health-host",
    default="0.0.0.0",  # noqa: S104  # a probe comes from outside the pod
    show_default=True,
    metavar="ADDRESS",
    help="The address --health-port binds.",
)
def run(options: HostOptions, *, health_port: int | None, health_host: str) -> None:
    """Run the tasks in this process until SIGTERM/SIGINT (the resident host)."""
    with stop_on_signals(StopRequest()) as stop:
        runtime, descriptors, control = options.boot("run")
        try:
            allowed = None if control is None else options.runtime_targets()
        except BaseException:
            runtime.close()
            if control is not None:
                control.close()
            raise
        heartbeat = None if health_port is None else Heartbeat()
        server = None
        if heartbeat is not None and health_port is not None:
            health = threaded_host_health(runtime, heartbeat)
            try:
                server = HealthServer(health, host=health_host, port=health_port).start()
            except OSError as err:
                runtime.close()
                raise click.UsageError(
                    f"--health-port {health_port}: cannot listen on {health_host}: {err}"
                ) from err
        host = ResidentHost(
            descriptors,
            runtime,
            grace_period=options.grace_period,
            max_workers=options.max_workers,
            stop=stop,
            heartbeat=heartbeat,
            control=control,
            runtime_targets=allowed,
        )
        try:
            status = host.run_until_stopped(handle_signals=False)
        finally:
            if server is not None:
                server.close()
    ignore_stop_signals()
    sys.exit(status)
