"""The pauses in force, for the listings that show them (`schedule`, `runs`).

A listing still works without steering: where no durable control store is configured
it shows no pause state (None), and where the store fails it says so on stderr and
goes on without it. The commands that change pauses (`cli.control`) refuse instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import click

from firefly_scheduling.control import ControlStoreError, FleetStatus, TaskState
from firefly_scheduling.control.steering import ScheduleControl
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.settings import Settings


def current_pauses(settings: Settings, targets: Iterable[str]) -> FleetStatus | None:
    """The state of `targets` (one read of the control store), or None when unknown."""
    try:
        control = ScheduleControl(settings)
    except ConfigurationError:
        return None
    try:
        return control.status(tasks=sorted(set(targets)))
    except ControlStoreError as err:
        click.echo(f"pause state unknown: {err}", err=True)
        return None
    finally:
        control.close()


def paused_line(state: TaskState) -> str:
    """`<target> is paused by <who> since <when>: <note>`, for a listing's footer."""
    since = (
        ""
        if state.since is None
        else datetime.fromtimestamp(state.since, UTC).isoformat(timespec="seconds")
    )
    scope = " (every task)" if state.all_tasks else ""
    note = f": {state.note}" if state.note else ""
    return f"{state.target} is paused{scope} by {state.by} since {since}{note}"


def paused_json(fleet: FleetStatus | None, target: str) -> bool | None:
    """Whether `target` is paused now; None when the state is unknown."""
    return None if fleet is None else fleet.of(target).paused
