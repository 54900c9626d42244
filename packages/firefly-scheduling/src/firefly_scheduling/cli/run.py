"""`firefly-scheduling run`: the resident host, one long-lived process per node.

Boot validation happens before the scheduler starts (`hosts.boot`): a bad cron,
zone, duration, lock provider or anchor store, a method task whose object cannot be
built, or no task at all, prints the reason and exits 2; a lock backend that does
not answer within `--wait-for-backend` seconds exits 3.
SIGTERM/SIGINT stop new fires, give running bodies `--grace-period` seconds, release
the locks and exit 0 (see `firefly_scheduling.hosts.shutdown`); a signal that comes
while the host boots stops it before the first fire.
"""

from __future__ import annotations

import sys

import click

from firefly_scheduling.cli.host_options import HostOptions, host_options
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.shutdown import StopRequest, ignore_stop_signals, stop_on_signals
from firefly_scheduling.hosts.workers import RESIDENT_MAX_WORKERS


@click.command()
@host_options(worker_ceiling=RESIDENT_MAX_WORKERS)
def run(options: HostOptions) -> None:
    """Run the tasks in this process until SIGTERM/SIGINT (the resident host)."""
    with stop_on_signals(StopRequest()) as stop:
        runtime, descriptors = options.boot("run")
        host = ResidentHost(
            descriptors,
            runtime,
            grace_period=options.grace_period,
            max_workers=options.max_workers,
            stop=stop,
        )
        status = host.run_until_stopped(handle_signals=False)
    ignore_stop_signals()
    sys.exit(status)
