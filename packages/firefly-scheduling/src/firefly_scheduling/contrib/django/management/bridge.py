"""Run a `firefly-scheduling` click command as a Django management command.

`manage.py firefly_run ARGS` is `firefly-scheduling run ARGS` with two things added:
Django's `FIREFLY_SCHEDULING` settings applied over the environment, and, unless
the arguments name their own task source (`--app`, `--manifest`), one `--app` per
installed app's `tasks` module. The click command keeps its own options, help and
exit statuses (2 for a configuration error, 3 for a lock backend that did not answer
at boot), so the two entry points never differ.
"""

from __future__ import annotations

import os
import sys
from typing import Any, ClassVar

import click
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from firefly_scheduling.cli.common import CONFIGURATION_ERROR_EXIT, reported
from firefly_scheduling.contrib.django.conf import process_environment, task_modules
from firefly_scheduling.errors import BackendUnavailable, ConfigurationError

#: Options by which the caller names the tasks itself.
_TASK_SOURCE_OPTIONS = ("--app", "--manifest")


class ClickBridgeCommand(BaseCommand):
    """A management command that hands its arguments to `click_command`."""

    click_command: ClassVar[click.Command]
    #: Whether the command takes the task-source options (`--app`...).
    takes_tasks: ClassVar[bool] = True

    def run_from_argv(self, argv: list[str]) -> None:
        """`manage.py <name> ARGS`: run the click command; its exit status is ours."""
        self.invoke_click(argv[2:], prog_name=f"{os.path.basename(argv[0])} {argv[1]}")

    def handle(self, *args: Any, **options: Any) -> None:
        """`call_command(<name>)`: the command with no arguments but the tasks."""
        self.invoke_click([], prog_name=self.__module__.rpartition(".")[2])

    def print_help(self, prog_name: str, subcommand: str) -> None:
        with click.Context(self.click_command, info_name=f"{prog_name} {subcommand}") as context:
            click.echo(self.click_command.get_help(context))

    def invoke_click(self, arguments: list[str], *, prog_name: str) -> None:
        try:
            os.environ.update(process_environment())
            modules = task_modules() if self.takes_tasks else []
        except ImproperlyConfigured as err:
            sys.stderr.write(f"Error: {err}\n")
            raise SystemExit(CONFIGURATION_ERROR_EXIT) from err
        named = any(arg.split("=", 1)[0] in _TASK_SOURCE_OPTIONS for arg in arguments)
        if self.takes_tasks and not named:
            if not modules:
                raise CommandError(
                    "no tasks.py in any installed app: add @scheduled tasks to an app's "
                    "tasks.py, or set FIREFLY_SCHEDULING['TASK_MODULES']"
                )
            arguments = [*(part for name in modules for part in ("--app", name)), *arguments]
        try:
            self.click_command.main(args=arguments, prog_name=prog_name, standalone_mode=False)
        except (ConfigurationError, BackendUnavailable) as err:  # as the CLI group does
            failure = reported(err)
            failure.show()
            raise SystemExit(failure.exit_code) from err
        except click.exceptions.Exit as done:
            raise SystemExit(done.exit_code) from None
        except click.ClickException as err:
            err.show()
            raise SystemExit(err.exit_code) from err
        except click.Abort as err:
            raise SystemExit(1) from err
