"""`firefly-scheduling pause`, `resume` and `status`: steer a running fleet from a shell.

Each goes through `ScheduleControl` (`control.steering`), on the configured control
store: the lock backend's own server, or `FIREFLY_SCHEDULING_CONTROL_URL`. A
configuration without a durable store exits 2 naming that variable; a store that
fails exits 1 with its message (redacted). Once `pause` returns, no fire of the task
later than that moment starts on any node (`fires.pausing`); `resume` lets the next
fire run, and the fires missed meanwhile stay recorded as skipped, reason `paused`.
Every change names who made it (`--by`, default `<login>@<host>`) and is kept in
the control store's audit trail; `status` shows who, when and why, and `status
--json` the newest changes too.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import click

from firefly_scheduling.cli.output import echo_json_lines, json_option
from firefly_scheduling.control import ALL_TASKS, Change, ControlStoreError, Pause, TaskState
from firefly_scheduling.control.steering import ScheduleControl
from firefly_scheduling.control.steering_state import operator
from firefly_scheduling.errors import ConfigurationError

_BY_HELP = "Who makes the change [default: <login>@<host>]."
#: How many of the newest changes `status --json` shows unless told.
DEFAULT_CHANGES = 20


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


def change_json(change: Change) -> dict[str, object]:
    """One change of the audit trail as `status --json` prints it in its task's row."""
    return {
        "change": change.what,
        "by": change.by,
        "at": _when(change.at),
        "detail": change.detail,
        "id": change.id,
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
@click.option("--by", default=None, help=_BY_HELP)
@json_option
def resume(task: str | None, all_tasks: bool, by: str | None, as_json: bool) -> None:
    """Resume TARGET (or lift the fleet-wide pause, with --all) from now.

    The fires missed while paused stay recorded as skipped ("paused"); none is caught up.
    """
    name = _task(task, all_tasks, "resume")
    who = operator(by)
    with ScheduleControl() as control:
        try:
            if name == ALL_TASKS:
                lifted = control.resume_all(by=who)
            else:
                lifted = control.resume(name, by=who)
        except ControlStoreError as err:
            raise click.ClickException(str(err)) from err
    shown = "every task" if name == ALL_TASKS else name
    if as_json:
        echo_json_lines([{"target": name, "resumed": lifted, "by": who}])
    else:
        click.echo(f"{shown} resumed" if lifted else f"{shown} was not paused")


@click.command()
@click.argument("task", required=False, metavar="TARGET")
@click.option(
    "--changes",
    type=click.IntRange(min=0),
    default=DEFAULT_CHANGES,
    show_default=True,
    metavar="N",
    help="With --json: the newest N changes of the audit trail, each in its task's row "
    "(a task changed lately gets a row, paused or not).",
)
@json_option
def status(task: str | None, changes: int, as_json: bool) -> None:
    """Show the pauses in force (the fleet-wide one first), or TARGET's state."""
    with ScheduleControl() as control:
        try:
            fleet = control.status(task, changes=changes if as_json else 0)
        except ControlStoreError as err:
            raise click.ClickException(str(err)) from err
    if as_json:
        echo_json_lines(_rows(fleet.all_tasks, fleet.tasks, task, fleet.changes))
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
    everything: Pause | None,
    states: tuple[TaskState, ...],
    task: str | None,
    changes: tuple[Change, ...],
) -> Iterator[dict[str, object]]:
    """One object per task, each with `changes`: its own among `changes`, newest first."""

    def of(target: str) -> list[dict[str, object]]:
        return [change_json(change) for change in changes if change.task == target]

    if task is None and (everything is not None or of(ALL_TASKS)):
        fleet = pause_json(everything) if everything else state_json(TaskState(ALL_TASKS, False))
        yield {**fleet, "all_tasks": True, "changes": of(ALL_TASKS)}
    for state in states:
        yield {**state_json(state), "changes": of(state.target)}
