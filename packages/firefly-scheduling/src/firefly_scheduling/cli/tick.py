"""`firefly-scheduling tick`: one pass for crontab or a Kubernetes CronJob, every minute.

Runs every task due in the current minute, repeating sub-minute cadences until the
minute ends, then exits. Exit status: 0 when every fire succeeded or was legitimately
not run here (claimed elsewhere, not due, held back, overlapping); 1 when any fire's
body failed, its lock backend failed or its lock was lost, so a CronJob alerts; 2 for
a configuration error, with the message; 3 for a lock backend that did not answer at
boot within `--wait-for-backend` seconds. `--json` prints one JSON object per fire
touched instead of the summary line, each with its error (a run abandoned at
shutdown included). SIGTERM/SIGINT (a CronJob's pod deleted, a deadline reached)
start no further slot, give running bodies `--grace-period` seconds and release the
locks; the exit status is then the same as without the signal (1 when a body
failed before it).
"""

from __future__ import annotations

import sys

import click

from firefly_scheduling.cli.host_options import HostOptions, host_options
from firefly_scheduling.cli.output import echo_json_lines, json_option
from firefly_scheduling.control.runtime_tasks import RuntimeTask
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.hosts.runtime.schedule_watch import (
    RuntimeScheduleSource,
    read_runtime_tasks,
)
from firefly_scheduling.hosts.runtime.shutdown import (
    StopRequest,
    exit_abandoning,
    ignore_stop_signals,
    stop_on_signals,
)
from firefly_scheduling.hosts.runtime.workers import TICK_MAX_WORKERS
from firefly_scheduling.hosts.tick import TickHost


@click.command()
@host_options(worker_ceiling=TICK_MAX_WORKERS)
@json_option
def tick(options: HostOptions, *, as_json: bool) -> None:
    """Run what is due in the current minute, then exit (the cron-driven host)."""
    with stop_on_signals(StopRequest()) as stop:
        runtime, descriptors, control = options.boot("tick")
        try:
            runtime_tasks = _runtime_tasks(options, control)
        except BaseException:
            runtime.close()
            raise
        host = TickHost(
            descriptors,
            runtime,
            grace_period=options.grace_period,
            max_workers=options.max_workers,
            stop=stop,
            control=control,
            runtime_tasks=runtime_tasks,
        )
        try:
            report = host.run()
        except BaseException:
            runtime.close()
            raise
        if not report.abandoned:
            # Closing the lock would free the task locks of bodies still running.
            runtime.close()
            if control is not None:
                control.close()
    ignore_stop_signals()
    if as_json:
        echo_json_lines(report.rows())
    else:
        click.echo(report.summary())
    if report.abandoned:
        exit_abandoning(report.exit_status)
    sys.exit(report.exit_status)


def _runtime_tasks(options: HostOptions, control: ControlStore | None) -> list[RuntimeTask]:
    """The runtime schedules this pass runs, read once from the boot's control store
    (none without one)."""
    if control is None:
        return []
    return read_runtime_tasks(RuntimeScheduleSource(control, options.runtime_targets()))
