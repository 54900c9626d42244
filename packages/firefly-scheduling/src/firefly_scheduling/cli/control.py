"""`firefly-scheduling pause`, `resume` and `status`: the control store from a shell.

Each is one call to the configured control store (`control.selection`): the lock
backend's own server, or `FIREFLY_SCHEDULING_CONTROL_URL`. A configuration without
a durable store exits 2 naming that variable; a store that fails exits 1 with its
message (redacted). The fire path does not read pauses yet: these commands record
them, and `status` shows what is recorded.
"""

from __future__ import annotations

import getpass
import socket
from datetime import UTC, datetime

import click

from firefly_scheduling.cli.output import echo_json_lines, json_option
from firefly_scheduling.control import ALL_TASKS, ControlStore, ControlStoreError, Pause
from firefly_scheduling.control.selection import resolve_control_store
from firefly_scheduling.errors import ConfigurationError


def operator_name(by: str | None) -> str:
    """`--by`, else `<login>@<host>`; a `ConfigurationError` when neither can be had."""
    if by is not None:
        return by
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (OSError, KeyError) as err:
        raise ConfigurationError(f"cannot tell who you are ({err}): pass --by NAME") from err


def _task(task: str | None, all_tasks: bool, command: str) -> str:
    if all_tasks == (task is not None):
        raise ConfigurationError(f"{command} takes a task target or --all, exactly one")
    return ALL_TASKS if task is None else task


def _store() -> ControlStore:
    return resolve_control_store()


def _shown(pause: Pause) -> str:
    since = datetime.fromtimestamp(pause.since, UTC).isoformat(timespec="seconds")
    who = "every task" if pause.all_tasks else pause.task
    note = f": {pause.note}" if pause.note else ""
    return f"{who} paused by {pause.by} since {since}{note}"


@click.command()
@click.argument("task", required=False, metavar="TARGET")
@click.option("--all", "all_tasks", is_flag=True, help="Pause every task of the fleet.")
@click.option("--by", default=None, help="Who pauses [default: <login>@<host>].")
@click.option("--note", default="", help="Why, for whoever reads `status`.")
def pause(task: str | None, all_tasks: bool, by: str | None, note: str) -> None:
    """Record a pause of TARGET (or of every task with --all) in the control store."""
    name = _task(task, all_tasks, "pause")
    store = _store()
    try:
        recorded = store.pause(name, by=operator_name(by), note=note)
    except ControlStoreError as err:
        raise click.ClickException(str(err)) from err
    finally:
        store.close()
    click.echo(_shown(recorded))


@click.command()
@click.argument("task", required=False, metavar="TARGET")
@click.option("--all", "all_tasks", is_flag=True, help="Lift the fleet-wide pause.")
def resume(task: str | None, all_tasks: bool) -> None:
    """Lift the pause of TARGET (or the fleet-wide one with --all)."""
    name = _task(task, all_tasks, "resume")
    store = _store()
    try:
        lifted = store.resume(name)
    except ControlStoreError as err:
        raise click.ClickException(str(err)) from err
    finally:
        store.close()
    shown = "every task" if name == ALL_TASKS else name
    click.echo(f"{shown} resumed" if lifted else f"{shown} was not paused")


@click.command()
@json_option
def status(as_json: bool) -> None:
    """Show the pauses recorded in the control store, the fleet-wide one first."""
    store = _store()
    try:
        pauses = store.pauses()
    except ControlStoreError as err:
        raise click.ClickException(str(err)) from err
    finally:
        store.close()
    if as_json:
        echo_json_lines(
            {
                "task": p.task,
                "by": p.by,
                "since": datetime.fromtimestamp(p.since, UTC),
                "note": p.note,
            }
            for p in pauses
        )
        return
    if not pauses:
        click.echo("no task is paused")
    for recorded in pauses:
        click.echo(_shown(recorded))
