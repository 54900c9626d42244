"""`firefly-scheduling schedules add|remove|list`: runtime schedules from a shell.

A runtime schedule runs a callable the code allows (`@schedulable` or `@scheduled`,
found by the task source: `--app`, the manifest, else `FIREFLY_SCAN_PACKAGES`) on
the `@scheduled` arguments given here, and every `run` node picks it up within
seconds (`hosts.runtime.schedule_watch`). Each command is one call to the control
store (`control.selection`). A refused value (a target the code does not allow, a
bad cron or duration) or no durable control store exits 2 naming it; a store that
fails, or a name already taken with other arguments, exits 1.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from firefly_scheduling.cli.common import extend_import_path, settings_for, task_source_options
from firefly_scheduling.cli.output import echo_json_lines, json_option
from firefly_scheduling.control import ControlStore, ControlStoreError, RuntimeSchedule
from firefly_scheduling.control.records import descriptor_fields
from firefly_scheduling.control.runtime_schedules import (
    add_runtime_schedule,
    remove_runtime_schedule,
    runtime_schedules,
)
from firefly_scheduling.control.runtime_tasks import RuntimeTask, runtime_task, runtime_tasks
from firefly_scheduling.control.selection import resolve_control_store
from firefly_scheduling.control.steering_state import operator
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.discovery import runtime_targets


@click.group()
def schedules() -> None:
    """Add, remove and list the schedules defined at runtime (in the control store)."""


@contextmanager
def _store() -> Iterator[ControlStore]:
    store = resolve_control_store()
    try:
        yield store
    except ControlStoreError as err:
        raise click.ClickException(str(err)) from err
    finally:
        store.close()


def _allowed(
    apps: tuple[str, ...], manifest: Path | None, paths: tuple[Path, ...]
) -> frozenset[str]:
    extend_import_path(paths)
    return runtime_targets(settings_for(manifest), packages=list(apps) or None)


@schedules.command()
@task_source_options
@click.argument("name")
@click.argument("target")
@click.option("--cron", default=None, metavar="EXPR", help="A 5-field crontab expression.")
@click.option("--fixed-rate", default=None, metavar="DURATION", help="Between starts, e.g. 30s.")
@click.option("--fixed-delay", default=None, metavar="DURATION", help="From end to start.")
@click.option("--zone", default=None, metavar="ZONE", help="The cron's IANA zone [default: UTC].")
@click.option(
    "--lock",
    default=None,
    metavar="NAME",
    help="The task lock's name [default: the schedule's NAME].",
)
@click.option("--lock-ttl", default=None, metavar="DURATION", help="[default: 30s]")
@click.option(
    "--overlap",
    default="skip",
    show_default=True,
    help="skip, allow_all, buffer_one, buffer_all or cancel_other.",
)
@click.option("--jitter", default=None, metavar="DURATION")
@click.option("--timeout", default=None, metavar="DURATION")
@click.option("--retries", type=int, default=None, metavar="N")
@click.option("--by", default=None, help="Who adds it [default: <login>@<host>].")
@json_option
def add(  # noqa: PLR0917 - click passes one parameter per option
    apps: tuple[str, ...],
    manifest: Path | None,
    paths: tuple[Path, ...],
    name: str,
    target: str,
    cron: str | None,
    fixed_rate: str | None,
    fixed_delay: str | None,
    zone: str | None,
    lock: str | None,
    lock_ttl: str | None,
    overlap: str,
    jitter: str | None,
    timeout: str | None,
    retries: int | None,
    by: str | None,
    as_json: bool,
) -> None:
    """Run TARGET on a schedule named NAME, on every node from within seconds."""
    arguments: dict[str, Any] = {
        "cron": cron,
        "fixed_rate": fixed_rate,
        "fixed_delay": fixed_delay,
        "zone": zone,
        "lock_ttl": lock_ttl,
        "overlap": overlap,
        "jitter": jitter,
        "timeout": timeout,
        "retries": retries,
    }
    if lock is not None:
        arguments["lock"] = lock
    allowed = _allowed(apps, manifest, paths)
    who = operator(by)
    with _store() as store:
        added = add_runtime_schedule(store, name, target, by=who, allowed=allowed, **arguments)
        stored = {item.name: item for item in runtime_schedules(store)}.get(name)
    if as_json:
        echo_json_lines([{"name": name, "added": added, **_json(stored, allowed)}])
    else:
        click.echo(f"runtime schedule {name!r} {'added' if added else 'already exists'}: {target}")


@schedules.command()
@click.argument("name")
@click.option("--by", default=None, help="Who removes it [default: <login>@<host>].")
@json_option
def remove(name: str, by: str | None, as_json: bool) -> None:
    """Remove the runtime schedule NAME; nodes stop it within seconds."""
    who = operator(by)
    with _store() as store:
        removed = remove_runtime_schedule(store, name, by=who)
    if as_json:
        echo_json_lines([{"name": name, "removed": removed, "by": who}])
    else:
        click.echo(f"runtime schedule {name!r} {'removed' if removed else 'did not exist'}")


@schedules.command(name="list")
@task_source_options
@json_option
def list_schedules(
    apps: tuple[str, ...], manifest: Path | None, paths: tuple[Path, ...], as_json: bool
) -> None:
    """List the runtime schedules, and whether the nodes of this code run them."""
    allowed = _allowed(apps, manifest, paths)
    with _store() as store:
        found = runtime_schedules(store)
    if as_json:
        echo_json_lines({"name": item.name, **_json(item, allowed)} for item in found)
        return
    if not found:
        click.echo("no runtime schedule")
    for item in found:
        shown = _json(item, allowed)
        when = (
            item.descriptor.cron
            or f"every {item.descriptor.fixed_rate or item.descriptor.fixed_delay}s"
        )
        state = "runs" if shown["runs"] else f"ignored by the nodes: {shown['refused']}"
        click.echo(f"{item.name}: {shown['target']} ({when}), added by {item.by}; {state}")


def _json(schedule: RuntimeSchedule | None, allowed: Collection[str]) -> dict[str, object]:
    """A runtime schedule's keys: `target` (the callable), its `@scheduled` arguments as
    stored (`arguments`, durations in seconds), `by`, `added_at`, and whether the
    nodes of this code run it (`runs`) or why not (`refused`)."""
    if schedule is None:  # removed between the add and the read
        return {"target": None, "arguments": None, "by": None, "added_at": None, "runs": False}
    try:
        runtime_task(schedule, allowed)
        refused = None
    except ConfigurationError as err:
        refused = str(err)
    fields = descriptor_fields(schedule.descriptor)
    target = fields.pop("target")
    return {
        "target": target,
        "arguments": fields,
        "by": schedule.by,
        "added_at": datetime.fromtimestamp(schedule.added_at, UTC).isoformat(),
        "runs": refused is None,
        "refused": refused,
    }


def listed_runtime_tasks(
    apps: tuple[str, ...], manifest: Path | None, paths: tuple[Path, ...]
) -> tuple[list[RuntimeTask], str]:
    """The runtime schedules the nodes of this code run, for `schedule`, and a note
    for its title: none (and no note) without a durable control store; none, and why,
    when the store fails."""
    settings = settings_for(manifest)
    try:
        store = resolve_control_store(settings)
    except ConfigurationError:
        return [], ""
    try:
        found = store.schedules()
    except ControlStoreError as err:
        return [], f"runtime schedules unread: {err}"
    finally:
        store.close()
    accepted, refused = runtime_tasks(found, _allowed(apps, manifest, paths))
    note = f"{len(accepted)} runtime schedule(s) from the control store"
    if refused:
        note += f" ({len(refused)} ignored by the nodes: see `schedules list`)"
    return accepted, note
