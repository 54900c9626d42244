"""`firefly-scheduling runs`: the run history, newest fire first.

One row per fire: its instant (UTC), task, lock name, state, trigger, attempt, node, start,
duration, fencing token, and the error (failed), or the reason (skipped, expired). Reads the
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
    LONGEST_WORD,
    console,
    echo_json_lines,
    iso,
    json_option,
    print_table,
    target_column,
    text_column,
)
from firefly_scheduling.cli.pause_state import current_pauses, paused_line
from firefly_scheduling.history import HistoryError, RunRecord, RunState, require_history
from firefly_scheduling.schedule.durations import format_elapsed
from firefly_scheduling.settings import Settings

_NONE = "-"
_STATE_STYLE = {
    RunState.RUNNING: "cyan",
    RunState.SUCCEEDED: "green",
    RunState.FAILED: "bold red",
    RunState.EXPIRED: "red",
    RunState.SKIPPED: "yellow",
    RunState.TIMED_OUT: "bold red",
    RunState.BUFFERED: "blue",
    RunState.CANCELLED: "magenta",
    RunState.CAUGHT_UP: "cyan",
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
@json_option
def runs(task: str | None, lock: str | None, limit: int, as_json: bool) -> None:
    """Show the run history, newest fire first."""
    history = require_history()
    try:
        records = history.runs(task, limit, lock=lock)
    except HistoryError as err:
        raise click.ClickException(str(err)) from err
    finally:
        history.close()
    if as_json:
        echo_json_lines(run_json(record) for record in records)
        return
    render_runs(records, console(), task)
    targets = {record.task for record in records} | ({task} if task else set())
    pauses = current_pauses(Settings.from_env(), targets) if targets else None
    for state in () if pauses is None else pauses.tasks:
        if state.paused:
            click.echo(paused_line(state))


def run_json(record: RunRecord) -> dict[str, object]:
    """One fire as a JSON object with stable keys; instants ISO 8601, durations in seconds.

    Keys: `target`, `lock`, `instant`, `state`, `attempt`, `node`, `started_at`,
    `ended_at`, `duration`, `token`, `error`, `trigger` (what made the fire:
    `scheduled`, `manual`, `backfill`, `runtime`), `requested_by` (who asked for a
    manual or backfill fire; null otherwise) and `reason` (why nobody ran a skipped
    or buffered fire; null otherwise).
    """
    return {
        "target": record.task,
        "lock": record.lock,
        "instant": iso(record.instant),
        "state": record.state.value,
        "attempt": record.attempt,
        "node": record.node,
        "started_at": iso(record.started_at),
        "ended_at": iso(record.ended_at),
        "duration": record.duration,
        "token": record.token,
        "error": record.error,
        "trigger": record.trigger,
        "requested_by": record.requested_by,
        "reason": record.reason,
    }


def render_runs(records: Sequence[RunRecord], console: Console, task: str | None = None) -> None:
    """Print `records` as a table, or say there is nothing recorded."""
    if not records:
        scope = f" for {task}" if task else ""
        console.print(f"[bold yellow]no run recorded{scope}[/]")
        return
    table = Table(title="Runs, newest fire first", title_justify="left")
    rows = [
        (
            _when(record.instant),
            record.task,
            record.lock,
            record.state.value,
            record.trigger,
            str(record.attempt),
            record.node,
            _NONE if record.started_at is None else _when(record.started_at),
            _NONE if record.duration is None else format_elapsed(record.duration),
            _NONE if record.token is None else str(record.token),
            record.error or _NONE,
        )
        for record in records
    ]
    text_column(table, "Fire (UTC)", (row[0] for row in rows))
    target_column(table, "Task", (record.task for record in records))
    target_column(table, "Lock", (record.lock for record in records))
    headers = ("State", "Trigger", "Try", "Node", "Started", "Took", "Token")
    for index, header in enumerate(headers, 3):
        text_column(table, header, (row[index] for row in rows))
    text_column(table, "Error / reason", (row[10] for row in rows), longest_word=LONGEST_WORD)
    for record, row in zip(records, rows, strict=True):
        state = f"[{_STATE_STYLE[record.state]}]{row[3]}[/]"
        table.add_row(*row[:3], state, *row[4:])
    print_table(console, table)


def _when(instant: datetime) -> str:
    text = f"{instant:%Y-%m-%d %H:%M:%S}"
    return text if instant.microsecond == 0 else f"{text}.{instant.microsecond // 1000:03d}"
