"""`firefly-scheduling trigger` and `backfill`: ask the fleet to run a task now, or replay.

Each checks the task against the tasks the options name (`--app`, `--manifest`,
`--path`, as `run` finds them): an unknown target, a naive time, an empty window
or a task that cannot be backfilled (fixed_delay, lock=False) exits 2 naming the
value. Then one write to the control store (`control.triggers`); the nodes
hosting the task run it (`hosts.runtime.steering`). A store that fails exits 1.
`--json` prints the stored request as one JSON object.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from firefly_scheduling.cli.common import discover_tasks, settings_for, task_source_options
from firefly_scheduling.cli.output import echo_json_lines, json_option
from firefly_scheduling.control import ControlStoreError
from firefly_scheduling.control.selection import resolve_control_store
from firefly_scheduling.control.steering_state import operator
from firefly_scheduling.control.triggers import backfill as request_backfill
from firefly_scheduling.control.triggers import trigger as request_trigger
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.backfill_plan import schedule_instants
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor


def _known_task(
    task: str, apps: tuple[str, ...], manifest: Path | None, paths: tuple[Path, ...]
) -> ScheduledDescriptor:
    """The task `task` names among the discovered ones; a `ConfigurationError` otherwise."""
    found = discover_tasks(apps, manifest, paths).descriptors
    for descriptor in found:
        if descriptor.target == task:
            return descriptor
    known = ", ".join(sorted(d.target for d in found)[:20]) or "(none found)"
    raise ConfigurationError(
        f"unknown task {task!r}: not among the tasks of the manifest or scan ({known})"
    )


def _aware(value: str, option: str) -> datetime:
    """`value` as an aware datetime; a `ConfigurationError` naming the option otherwise."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise ConfigurationError(f"{option} {value!r} is not an ISO-8601 time: {err}") from err
    if parsed.tzinfo is None:
        raise ConfigurationError(
            f"{option} {value!r} has no time zone: give it with Z or an offset "
            "(2030-01-01T00:00:00Z, 2030-01-01T01:00:00+01:00)"
        )
    return parsed.astimezone(UTC)


@click.command()
@click.argument("task", metavar="TARGET")
@click.option("--by", default=None, help="Who triggers [default: <login>@<host>].")
@task_source_options
@json_option
def trigger(
    task: str,
    *,
    by: str | None,
    apps: tuple[str, ...],
    manifest: Path | None,
    paths: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Run TARGET once more, now, on one node of the fleet (even while it is paused)."""
    _known_task(task, apps, manifest, paths)
    store = resolve_control_store(settings_for(manifest))
    try:
        asked = request_trigger(store, task, by=operator(by))
    except ControlStoreError as err:
        raise click.ClickException(str(err)) from err
    finally:
        store.close()
    at = datetime.fromtimestamp(asked.requested_at, UTC)
    if as_json:
        echo_json_lines([{"task": asked.task, "by": asked.by, "requested_at": at, "id": asked.id}])
        return
    click.echo(f"{asked.task} triggered by {asked.by} at {at.isoformat()} (id {asked.id})")


@click.command()
@click.argument("task", metavar="TARGET")
@click.option("--from", "start", required=True, metavar="ISO", help="First instant (included).")
@click.option("--to", "end", required=True, metavar="ISO", help="End of the window (excluded).")
@click.option("--by", default=None, help="Who backfills [default: <login>@<host>].")
@task_source_options
@json_option
def backfill(
    task: str,
    *,
    start: str,
    end: str,
    by: str | None,
    apps: tuple[str, ...],
    manifest: Path | None,
    paths: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Run TARGET's scheduled instants in [--from, --to) that have no successful run."""
    descriptor = _known_task(task, apps, manifest, paths)
    window = (_aware(start, "--from"), _aware(end, "--to"))
    if descriptor.lock_name is None:
        raise ConfigurationError(
            f"{task}: a backfill needs a locked task; with lock=False every node would run "
            "each instant"
        )
    settings = settings_for(manifest)
    store = resolve_control_store(settings)
    try:
        instants = schedule_instants(descriptor, *window) if window[0] < window[1] else []
        asked = request_backfill(store, task, *window, by=operator(by), settings=settings)
    except ControlStoreError as err:
        raise click.ClickException(str(err)) from err
    finally:
        store.close()
    if as_json:
        echo_json_lines(
            [
                {
                    "task": asked.task,
                    "start": asked.start,
                    "end": asked.end,
                    "by": asked.by,
                    "requested_at": datetime.fromtimestamp(asked.requested_at, UTC),
                    "instants": len(instants),
                }
            ]
        )
        return
    click.echo(
        f"backfill of {asked.task} [{asked.start.isoformat()}, {asked.end.isoformat()}) "
        f"asked by {asked.by}: {len(instants)} scheduled instant(s); those without a "
        "successful run will run, oldest first"
    )
