"""The `firefly-scheduling` command line.

This module is only a registry: each command lives in its own module and is added
here with one line. Commands of other distributions (the database adapter's
`migrate`, say) are found through the entry-point group
`firefly_scheduling.cli_commands` and imported only when invoked or listed.
"""

from __future__ import annotations

import click

from firefly_scheduling.cli.cache import cache
from firefly_scheduling.cli.common import FireflyGroup
from firefly_scheduling.cli.control import pause, resume, status
from firefly_scheduling.cli.demo import demo
from firefly_scheduling.cli.monitor import monitor
from firefly_scheduling.cli.prune import prune
from firefly_scheduling.cli.run import run
from firefly_scheduling.cli.runs import runs
from firefly_scheduling.cli.schedule import schedule
from firefly_scheduling.cli.schedules import schedules
from firefly_scheduling.cli.steer import backfill, trigger
from firefly_scheduling.cli.tick import tick
from firefly_scheduling.cli.versions import version_option

CLI_COMMANDS_GROUP = "firefly_scheduling.cli_commands"


@click.group(cls=FireflyGroup, plugin_group=CLI_COMMANDS_GROUP)
@version_option
def main() -> None:
    """Run scheduled tasks on at most one node of a fleet."""


main.add_command(schedule)
main.add_command(cache)
main.add_command(run)
main.add_command(tick)
main.add_command(demo)
main.add_command(runs)
main.add_command(monitor)
main.add_command(prune)
main.add_command(pause)
main.add_command(resume)
main.add_command(status)
main.add_command(schedules)
main.add_command(trigger)
main.add_command(backfill)

__all__ = ["main"]
