"""`firefly-scheduling schedule`: list every task and what each host will do with it.

One row per task: its target, its trigger as written (a cron verbatim, or the
exact fixed rate/delay the resident host keeps), what `tick` runs (the cron, or
the cadence bucket the interval rounds up to), the zone, the lock name and TTL,
the initial delay, and the next fire in UTC (and in the task's zone). A lock
named after its task (`lock=True`, the default) is shown as `= target`; a task
declared `lock=False` as running on every node. When no
task is found it says so, and why. The runtime schedules the nodes run (from the
control store, when there is one) are listed too, each under its name; `--json`
marks them `"runtime": true`, with `runs`, the callable's target.

`--host run|tick` says which host the listing describes: the exact interval and
its epoch-aligned next fire for `run` (the default), the cadence bucket and its
next fire for `tick`. `--json` prints one object per task instead (keys in
`schedule_json`). `--next N` lists each task's next N fires instead, with its DST
policies (see `schedule_next`); `--from` sets the instant the listing starts from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from firefly_scheduling.cli.common import discover_tasks, settings_for, task_source_options
from firefly_scheduling.cli.output import (
    console,
    echo_json_lines,
    iso,
    json_option,
    print_table,
    target_column,
    text_column,
)
from firefly_scheduling.cli.pause_state import current_pauses, paused_json, paused_line
from firefly_scheduling.cli.schedule_next import render_upcoming, upcoming_fires, upcoming_json
from firefly_scheduling.cli.schedules import listed_runtime_tasks
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.initial_delay.gate import first_run_from
from firefly_scheduling.initial_delay.port import AnchorStoreError
from firefly_scheduling.initial_delay.selection import resolve_anchor_store
from firefly_scheduling.schedule.cadence import Cadence
from firefly_scheduling.schedule.durations import format_duration
from firefly_scheduling.schedule.next_fire import HOSTS, Host, cron_schedule_of
from firefly_scheduling.schedule.next_fire import next_fire as next_fire_under
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.discovery import DiscoveredTasks
from firefly_scheduling.tasks.retry_arguments import retry_json

_NONE = "-"
#: The lock column of a `lock=False` task: it runs on every node, and says so.
UNLOCKED = "none: runs on every node"


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


def schedule_row(
    descriptor: ScheduledDescriptor,
    now: datetime,
    host: Host = "run",
    first_run: datetime | None = None,
) -> ScheduleRow:
    """Describe `descriptor` for the listing; `now` (aware) anchors the next fire under `host`.

    `first_run` is the earliest its initial delay lets it first run, when known.
    """
    if descriptor.cron is not None:
        cron = cron_schedule_of(descriptor)
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
        lock = UNLOCKED
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
        initial_delay=_initial_delay_text(descriptor, now, first_run),
        next_fire=next_text,
    )


def _initial_delay_text(
    descriptor: ScheduledDescriptor, now: datetime, first_run: datetime | None
) -> str:
    """The delay, and when the first run may come: known from the anchor, or not yet."""
    if descriptor.initial_delay is None:
        return _NONE
    delay = format_duration(descriptor.initial_delay)
    if first_run is None:
        return f"{delay}\nfirst run {delay} after the task is first seen"
    if first_run <= now:
        return f"{delay}\nelapsed at {first_run:%Y-%m-%d %H:%M:%S} UTC"
    return f"{delay}\nfirst run from {first_run:%Y-%m-%d %H:%M:%S} UTC"


def first_runs(
    descriptors: Sequence[ScheduledDescriptor], settings: Settings
) -> dict[str, datetime]:
    """The earliest first run of each delayed task whose anchor exists, read from the store.

    A store that is per-process (nothing to read) or unreachable leaves them unknown:
    the listing then says the delay counts from the first sighting.
    """
    delayed = [d for d in descriptors if d.initial_delay is not None]
    if not delayed:
        return {}
    try:
        store = resolve_anchor_store(settings)
    except ConfigurationError:
        return {}
    try:
        if not store.shared_across_processes:
            return {}
        found = {d.target: first_run_from(store, d) for d in delayed}
    except AnchorStoreError:
        return {}
    finally:
        store.close()
    return {target: instant for target, instant in found.items() if instant is not None}


def render_schedule(
    descriptors: Sequence[ScheduledDescriptor],
    explanation: str,
    console: Console,
    now: datetime,
    host: Host = "run",
    *,
    first_run: dict[str, datetime] | None = None,
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
        for row in (
            schedule_row(descriptor, now, host, (first_run or {}).get(descriptor.target))
            for descriptor in descriptors
        )
    ]
    target_column(table, "Target", (d.target for d in descriptors))
    headers = ("Schedule", "Zone", "Lock", "Initial delay", "Next fire")
    for index, header in enumerate(headers, start=1):
        text_column(table, header, (row[index] for row in cells))
    for row in cells:
        table.add_row(*row)
    print_table(console, table)


def schedule_json(
    descriptor: ScheduledDescriptor,
    now: datetime,
    host: Host = "run",
    first_run: datetime | None = None,
) -> dict[str, object]:
    """One task as a JSON object with stable keys; durations in seconds, instants ISO 8601.

    Keys: `target`, `cron`, `fixed_rate`, `fixed_delay`, `zone`, `dst_gap` and
    `dst_fold` (a cron task's effective DST policies), `schedule` (as the
    table shows it for `host`), `lock`, `lock_ttl`, `runs_on` (`one node` or, for a
    `lock=False` task, `every node`), `initial_delay`, `first_run_from` (the earliest
    first run its delay allows, null when it has no delay or is not seen yet),
    `jitter` and `timeout` (seconds, null without), `overlap` (the policy's name,
    `skip` by default), `catchup` (seconds) and `catchup_limit` (fires; both null
    without catch-up), `next_fire` (null when the interval starts when the host does;
    the instant, not the jittered start), `retries` (null without), `retry_backoff`
    and `retry_backoff_max` (seconds, their defaults filled in; null without retries).
    """
    row = schedule_row(descriptor, now, host, first_run)
    cron = cron_schedule_of(descriptor) if descriptor.cron is not None else None
    upcoming = cron.next_after(now) if cron is not None else next_fire_under(descriptor, host, now)
    return {
        "target": descriptor.target,
        "cron": descriptor.cron,
        "fixed_rate": descriptor.fixed_rate,
        "fixed_delay": descriptor.fixed_delay,
        "zone": None if descriptor.cron is None else descriptor.zone or "UTC",
        "dst_gap": None if cron is None else cron.dst.gap,
        "dst_fold": None if cron is None else cron.dst.fold,
        "schedule": row.trigger if host == "run" else row.under_tick,
        "lock": descriptor.lock_name,
        "lock_ttl": descriptor.lock_ttl if descriptor.lock_name is not None else None,
        "runs_on": "every node" if descriptor.lock_name is None else "one node",
        "initial_delay": descriptor.initial_delay,
        "first_run_from": iso(first_run),
        "jitter": descriptor.jitter,
        "timeout": descriptor.timeout,
        "overlap": descriptor.overlap or "skip",
        "catchup": descriptor.catchup,
        "catchup_limit": descriptor.catchup_limit,
        "next_fire": iso(upcoming),
        **retry_json(descriptor),
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
@click.option(
    "--next",
    "count",
    type=click.IntRange(1, 1000),
    help="List each task's next N fires, with its DST policies, instead of the summary.",
)
@click.option(
    "--from",
    "start",
    callback=lambda _context, _parameter, value: _instant(value),
    help="Start the listing at this ISO-8601 instant with an offset (default: now).",
)
def schedule(  # noqa: PLR0917 - click passes one parameter per option
    apps: tuple[str, ...],
    manifest: Path | None,
    paths: tuple[Path, ...],
    host: Host,
    as_json: bool,
    count: int | None,
    start: datetime | None,
) -> None:
    """List every scheduled task: trigger, zone, lock, initial delay, next fire."""
    discovered = discover_tasks(apps, manifest, paths)
    runtime, note = listed_runtime_tasks(apps, manifest, paths)
    if runtime or note:
        descriptors = (*discovered.descriptors, *(task.task for task in runtime))
        discovered = DiscoveredTasks(descriptors, f"{discovered.explanation}; {note}")
    now = start or datetime.now(UTC)
    if count is not None:
        if as_json:
            echo_json_lines(
                upcoming_json(fire)
                for d in discovered.descriptors
                for fire in upcoming_fires(d, host, now, count)
            )
        elif discovered.descriptors:
            render_upcoming(discovered.descriptors, console(), now, host, count)
        else:
            console().print(f"[bold yellow]{discovered.explanation}[/]", soft_wrap=True)
        return
    settings = settings_for(manifest)
    first_run = first_runs(discovered.descriptors, settings)
    runs = {task.name: task.callable_target for task in runtime}
    # A runtime schedule is paused under its task target's rules only: not listed here.
    pauses = current_pauses(
        settings, (d.target for d in discovered.descriptors if d.target not in runs)
    )
    if as_json:
        echo_json_lines(
            {
                **schedule_json(d, now, host, first_run.get(d.target)),
                "runtime": d.target in runs,
                "runs": runs.get(d.target, d.target),
                "paused": paused_json(pauses, d.target),
            }
            for d in discovered.descriptors
        )
        return
    render_schedule(
        discovered.descriptors, discovered.explanation, console(), now, host, first_run=first_run
    )
    for state in () if pauses is None else pauses.tasks:
        if state.paused:
            click.echo(paused_line(state))


def _instant(text: str | None) -> datetime | None:
    """`--from`: an ISO-8601 instant with an offset (`Z` or `+02:00`), as UTC."""
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise click.BadParameter(
            f"{text!r} is not an ISO-8601 instant with an offset, e.g. 2026-03-29T00:00Z"
        )
    return parsed.astimezone(UTC)
