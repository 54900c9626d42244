"""`firefly-scheduling schedule`: list every task and what each host will do with it.

One row per task: its target, its trigger as written (a cron verbatim, or the
exact fixed rate/delay the resident host keeps), what `tick` runs (the cron, or
the cadence bucket the interval rounds up to), the zone, the lock name and TTL,
the initial delay, and the next fire in UTC (and in the task's zone). A lock
named after its task (`lock=True`) is shown as `= target`. When no
task is found it says so, and why.

`--host run|tick` says which host the listing describes: the exact interval and
its epoch-aligned next fire for `run` (the default), the cadence bucket and its
next fire for `tick`. `--json` prints one object per task instead (keys in
`schedule_json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from firefly_scheduling.cadence import Cadence
from firefly_scheduling.cli.common import discover_tasks, task_source_options
from firefly_scheduling.cli.output import (
    console,
    echo_json_lines,
    iso,
    json_option,
    print_table,
    target_column,
    text_column,
)
from firefly_scheduling.cron import CronSchedule
from firefly_scheduling.descriptor import ScheduledDescriptor
from firefly_scheduling.durations import format_duration
from firefly_scheduling.hosts.next_fire import HOSTS, Host
from firefly_scheduling.hosts.next_fire import next_fire as next_fire_under

_NONE = "-"


@dataclass(frozen=True)
class ScheduleRow:
    """One task, as the listing shows it."""

    target: str
    trigger: str
    under_tick: str
    zone: str
    lock: str
    initial_delay: str
    next_fire: str


def schedule_row(descriptor: ScheduledDescriptor, now: datetime, host: Host = "run") -> ScheduleRow:
    """Describe `descriptor` for the listing; `now` (aware) anchors the next fire under `host`."""
    if descriptor.cron is not None:
        cron = CronSchedule.parse(descriptor.cron, descriptor.zone, source=descriptor.target)
        trigger = under_tick = descriptor.cron
        next_fire = cron.next_after(now)
        local = next_fire.astimezone(cron.zone)
        next_text = f"{next_fire:%Y-%m-%d %H:%M} UTC"
        if cron.zone_name != "UTC":
            local_date = "" if local.date() == next_fire.date() else f"{local:%Y-%m-%d} "
            next_text += f"\n{local_date}{local:%H:%M} {cron.zone_name}"
    else:
        interval = descriptor.fixed_rate or descriptor.fixed_delay or 0.0
        kind = "fixed rate" if descriptor.fixed_rate is not None else "fixed delay"
        trigger = f"{kind} {format_duration(interval)}"
        under_tick = Cadence.of_seconds(interval).describe()
        upcoming = next_fire_under(descriptor, host, now)
        next_text = (
            "when the host starts, then after each run"
            if upcoming is None
            else f"{upcoming:%Y-%m-%d %H:%M:%S} UTC"
        )
    if descriptor.lock_name is None:
        lock = _NONE
    else:
        # A lock named after its task (lock=True) is shown as such, to keep rows short.
        name = "= target" if descriptor.lock_name == descriptor.target else descriptor.lock_name
        lock = f"{name}, ttl {format_duration(descriptor.lock_ttl or 0.0)}"
    return ScheduleRow(
        target=descriptor.target,
        trigger=trigger,
        under_tick=under_tick,
        zone=_NONE if descriptor.cron is None else descriptor.zone or "UTC",
        lock=lock,
        initial_delay=(
            _NONE if descriptor.initial_delay is None else format_duration(descriptor.initial_delay)
        ),
        next_fire=next_text,
    )


def render_schedule(
    descriptors: Sequence[ScheduledDescriptor],
    explanation: str,
    console: Console,
    now: datetime,
    host: Host = "run",
) -> None:
    """Print the listing (or the plain reason why there is nothing to list)."""
    if not descriptors:
        console.print(f"[bold yellow]{explanation}[/]", soft_wrap=True)
        return
    title = f"{explanation}; as `firefly-scheduling {host}` runs them"
    table = Table(title=title, title_justify="left", show_lines=True)
    cells = [
        (
            row.target,
            row.trigger if host == "run" else row.under_tick,
            row.zone,
            row.lock,
            row.initial_delay,
            row.next_fire,
        )
        for row in (schedule_row(descriptor, now, host) for descriptor in descriptors)
    ]
    target_column(table, "Target", (d.target for d in descriptors))
    headers = ("Schedule", "Zone", "Lock", "Initial delay", "Next fire")
    for index, header in enumerate(headers, start=1):
        text_column(table, header, (row[index] for row in cells))
    for row in cells:
        table.add_row(*row)
    print_table(console, table)


def schedule_json(
    descriptor: ScheduledDescriptor, now: datetime, host: Host = "run"
) -> dict[str, object]:
    """One task as a JSON object with stable keys; durations in seconds, instants ISO 8601.

    Keys: `target`, `cron`, `fixed_rate`, `fixed_delay`, `zone`, `schedule` (as the
    table shows it for `host`), `lock`, `lock_ttl`, `initial_delay`, `next_fire`
    (null when the interval starts when the host does).
    """
    row = schedule_row(descriptor, now, host)
    if descriptor.cron is not None:
        cron = CronSchedule.parse(descriptor.cron, descriptor.zone, source=descriptor.target)
        upcoming: datetime | None = cron.next_after(now)
    else:
        upcoming = next_fire_under(descriptor, host, now)
    return {
        "target": descriptor.target,
        "cron": descriptor.cron,
        "fixed_rate": descriptor.fixed_rate,
        "fixed_delay": descriptor.fixed_delay,
        "zone": None if descriptor.cron is None else descriptor.zone or "UTC",
        "schedule": row.trigger if host == "run" else row.under_tick,
        "lock": descriptor.lock_name,
        "lock_ttl": descriptor.lock_ttl if descriptor.lock_name is not None else None,
        "initial_delay": descriptor.initial_delay,
        "next_fire": iso(upcoming),
    }


@click.command()
@task_source_options
@json_option
@click.option(
    "--host",
    type=click.Choice(HOSTS),
    default="run",
    show_default=True,
    help="Which host to describe: exact intervals (run) or cadence buckets (tick).",
)
def schedule(
    apps: tuple[str, ...], manifest: Path | None, paths: tuple[Path, ...], host: Host, as_json: bool
) -> None:
    """List every scheduled task: trigger, zone, lock, initial delay, next fire."""
    discovered = discover_tasks(apps, manifest, paths)
    now = datetime.now(UTC)
    if as_json:
        echo_json_lines(schedule_json(d, now, host) for d in discovered.descriptors)
        return
    render_schedule(discovered.descriptors, discovered.explanation, console(), now, host)
