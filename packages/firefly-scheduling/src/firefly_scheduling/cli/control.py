"""`firefly-scheduling pause`, `resume` and `status`: steer a running fleet from a shell.

Each goes through `ScheduleControl` (`control.steering`), on the configured control
store: the lock backend's own server, or `FIREFLY_SCHEDULING_CONTROL_URL`. A
configuration without a durable store exits 2 naming that variable; a store that
fails exits 1 with its message (redacted). Once `pause` returns, no fire of the task
later than that moment starts on any node (`fires.pausing`); `resume` lets the next
fire run, and the fires missed meanwhile stay recorded as skipped, reason `paused`.
Every change names who made it (`--by`, default `<login>@<host>`), and `status`
shows who, when and why.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import click

from firefly_scheduling.cli.output import echo_json_lines, json_option
from firefly_scheduling.control import ALL_TASKS, ControlStoreError, Pause, TaskState
from firefly_scheduling.control.steering import ScheduleControl
from firefly_scheduling.control.steering_state import operator
from firefly_scheduling.errors import ConfigurationError

_BY_HELP = "Who makes the change [default: <login>@<host>]."


def _task(task: str | None, all_tasks: bool, command: str) -> str:
    if all_tasks == (task is not None):
        raise ConfigurationError(f"{command} takes a task target or --all, exactly one")
    return ALL_TASKS if task is None else task


def _when(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _shown(pause: Pause) -> str:
    who = "every task" if pause.all_tasks else pause.task
    note = f": {pause.note}" if pause.note else ""
    return f"{who} paused by {pause.by} since {_when(pause.since)}{note}"


def pause_json(pause: Pause) -> dict[str, object]:
    """A pause as `status --json` and `pause --json` print it."""
    return {
        "target": pause.task,
        "paused": True,
        "all_tasks": pause.all_tasks,
        "note": pause.note,
        "by": pause.by,
        "since": _when(pause.since),
    }


def state_json(state: TaskState) -> dict[str, object]:
    """A task's state as `status --json` prints it (target, paused, note, by, since)."""
    return {
        "target": state.target,
        "paused": state.paused,
        "all_tasks": state.all_tasks,
        "note": state.note,
        "by": state.by or None,
        "since": _when(state.since),
    }


@click.command()
@click.argument("task", required=False, metavar="TARGET")
@click.option("--all", "all_tasks", is_flag=True, help="Pause every task of the fleet.")
@click.option("--by", default=None, help=_BY_HELP)
@click.option("--note", default=None, help="Why, for whoever reads `status`.")
@json_option
def pause(
    task: str | None, all_tasks: bool, by: str | None, note: str | None, as_json: bool
) -> None:
    """Pause TARGET (or every task, with --all): no later fire of it starts on any node."""
    name = _task(task, all_tasks, "pause")
    with ScheduleControl() as control:
        try:
            if name == ALL_TASKS:
                recorded = control.pause_all(note=note, by=by)
            else:
                recorded = control.pause(name, note=note, by=by)
        except ControlStoreError as err:
            raise click.ClickException(str(err)) from err
    if as_json:
        echo_json_lines([pause_json(recorded)])
    else:
        click.echo(_shown(recorded))


@click.command()
@click.argument("task", required=False, metavar="TARGET")
@click.option("--all", "all_tasks", is_flag=True, help="Lift the fleet-wide pause.")
@click.option(
    "--by",
    default=None,
    help="Who resumes, echoed in --json [default: <login>@<host>]; a resume deletes the "
    "pause, and the store keeps no record of it.",
)
@json_option
def resume(task: str | None, all_tasks: bool, by: str | None, as_json: bool) -> None:
    """Resume TARGET (or lift the fleet-wide pause, with --all) from now.

    The fires missed while paused stay recorded as skipped ("paused"); none is caught up.
    """
    name = _task(task, all_tasks, "resume")
    with ScheduleControl() as control:
        try:
            lifted = control.resume_all() if name == ALL_TASKS else control.resume(name)
        except ControlStoreError as err:
            raise click.ClickException(str(err)) from err
    shown = "every task" if name == ALL_TASKS else name
    if as_json:
        echo_json_lines([{"target": name, "resumed": lifted, "by": operator(by)}])
    else:
        click.echo(f"{shown} resumed" if lifted else f"{shown} was not paused")


@click.command()
@click.argument("task", required=False, metavar="TARGET")
@json_option
def status(task: str | None, as_json: bool) -> None:
    """Show the pauses in force (the fleet-wide one first), or TARGET's state."""
    with ScheduleControl() as control:
        try:
            fleet = control.status(task)
        except ControlStoreError as err:
            raise click.ClickException(str(err)) from err
    if as_json:
        echo_json_lines(_rows(fleet.all_tasks, fleet.tasks, task))
        return
    if task is not None:
        state = fleet.of(task)
        if not state.paused:
            click.echo(f"{task} runs (not paused)")
            return
    if fleet.all_tasks is None and not any(state.paused for state in fleet.tasks):
        click.echo("no task is paused")
        return
    if fleet.all_tasks is not None:
        click.echo(_shown(fleet.all_tasks))
    for state in fleet.tasks:
        if state.paused and not state.all_tasks:
            click.echo(
                f"{state.target} paused by {state.by} since {_when(state.since)}"
                + (f": {state.note}" if state.note else "")
            )


def _rows(
    everything: Pause | None, states: tuple[TaskState, ...], task: str | None
) -> Iterator[dict[str, object]]:
    if everything is not None and task is None:
        yield pause_json(everything)
    for state in states:
        yield state_json(state)
