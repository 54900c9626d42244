"""`firefly-scheduling runs`: the run history, newest fire first.

One row per fire: its instant (UTC), task, lock name, state, attempt, node, start, duration,
fencing token, and the error (failed), or the reason (skipped, expired). Reads the
history configured by `firefly.scheduling.history.url` (see `history.selection`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime

import click
from rich.console import Console
from rich.table import Table

from firefly_scheduling.durations import format_elapsed
from firefly_scheduling.history import HistoryError, RunRecord, RunState, require_history

_NONE = "-"
#: Columns for a pipe or a CI log, which have no width of their own.
PIPE_WIDTH = 160
_STATE_STYLE = {
    RunState.RUNNING: "cyan",
    RunState.SUCCEEDED: "green",
    RunState.FAILED: "bold red",
    RunState.EXPIRED: "red",
    RunState.SKIPPED: "yellow",
}


@click.command()
@click.option("--task", default=None, metavar="TARGET", help="Only this task (its target).")
@click.option(
    "--lock",
    default=None,
    metavar="NAME",
    help="Only the fires recorded under this task lock name (one deployment's).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many fires to show.",
)
def runs(task: str | None, lock: str | None, limit: int) -> None:
    """Show the run history, newest fire first."""
    history = require_history()
    try:
        records = history.runs(task, limit, lock=lock)
    except HistoryError as err:
        raise click.ClickException(str(err)) from err
    finally:
        history.close()
    render_runs(records, history_console(), task)


def render_runs(records: Sequence[RunRecord], console: Console, task: str | None = None) -> None:
    """Print `records` as a table, or say there is nothing recorded."""
    if not records:
        scope = f" for {task}" if task else ""
        console.print(f"[bold yellow]no run recorded{scope}[/]")
        return
    table = Table(title="Runs, newest fire first", title_justify="left")
    headers = ("Fire (UTC)", "Task", "Lock", "State", "Try", "Node", "Started", "Took", "Token")
    for header in headers:
        table.add_column(header, overflow="fold")
    table.add_column("Error / reason", overflow="fold")
    for record in records:
        style = _STATE_STYLE[record.state]
        duration = record.duration
        table.add_row(
            _when(record.instant),
            record.task,
            record.lock,
            f"[{style}]{record.state.value}[/]",
            str(record.attempt),
            record.node,
            _NONE if record.started_at is None else _when(record.started_at),
            _NONE if duration is None else format_elapsed(duration),
            _NONE if record.token is None else str(record.token),
            record.error or _NONE,
        )
    console.print(table)


def history_console() -> Console:
    """A console that keeps rows readable when the output is not a terminal."""
    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = PIPE_WIDTH
    return console


def _when(instant: datetime) -> str:
    text = f"{instant:%Y-%m-%d %H:%M:%S}"
    return text if instant.microsecond == 0 else f"{text}.{instant.microsecond // 1000:03d}"
