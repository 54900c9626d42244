"""`firefly-scheduling runs`: the run history, newest fire first.

One row per fire: its instant (UTC), task, state, attempt, node, start, duration,
fencing token, and the error (failed), or the reason (skipped, expired). Reads the
history configured by `firefly.scheduling.history.url` (see `history.selection`).
`--json` prints one object per fire instead (keys in `run_json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import click
from rich.console import Console
from rich.table import Table

from firefly_scheduling.cli.output import (
    console,
    echo_json_lines,
    iso,
    json_option,
    print_table,
    target_column,
)
from firefly_scheduling.durations import format_elapsed
from firefly_scheduling.history import HistoryError, RunRecord, RunState, require_history

_NONE = "-"
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
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many fires to show.",
)
@json_option
def runs(task: str | None, limit: int, as_json: bool) -> None:
    """Show the run history, newest fire first."""
    history = require_history()
    try:
        records = history.runs(task, limit)
    except HistoryError as err:
        raise click.ClickException(str(err)) from err
    finally:
        history.close()
    if as_json:
        echo_json_lines(run_json(record) for record in records)
        return
    render_runs(records, console(), task)


def run_json(record: RunRecord) -> dict[str, object]:
    """One fire as a JSON object with stable keys; instants ISO 8601, durations in seconds.

    Keys: `target`, `instant`, `state`, `attempt`, `node`, `started_at`, `ended_at`,
    `duration`, `token`, `error`.
    """
    return {
        "target": record.task,
        "instant": iso(record.instant),
        "state": record.state.value,
        "attempt": record.attempt,
        "node": record.node,
        "started_at": iso(record.started_at),
        "ended_at": iso(record.ended_at),
        "duration": record.duration,
        "token": record.token,
        "error": record.error,
    }


def render_runs(records: Sequence[RunRecord], console: Console, task: str | None = None) -> None:
    """Print `records` as a table, or say there is nothing recorded."""
    if not records:
        scope = f" for {task}" if task else ""
        console.print(f"[bold yellow]no run recorded{scope}[/]")
        return
    table = Table(title="Runs, newest fire first", title_justify="left")
    table.add_column("Fire (UTC)", overflow="fold")
    target_column(table, "Task", (record.task for record in records))
    for header in ("State", "Try", "Node", "Started", "Took", "Token"):
        table.add_column(header, overflow="fold")
    table.add_column("Error / reason", overflow="fold")
    for record in records:
        style = _STATE_STYLE[record.state]
        duration = record.duration
        table.add_row(
            _when(record.instant),
            record.task,
            f"[{style}]{record.state.value}[/]",
            str(record.attempt),
            record.node,
            _NONE if record.started_at is None else _when(record.started_at),
            _NONE if duration is None else format_elapsed(duration),
            _NONE if record.token is None else str(record.token),
            record.error or _NONE,
        )
    print_table(console, table)


def _when(instant: datetime) -> str:
    text = f"{instant:%Y-%m-%d %H:%M:%S}"
    return text if instant.microsecond == 0 else f"{text}.{instant.microsecond // 1000:03d}"
