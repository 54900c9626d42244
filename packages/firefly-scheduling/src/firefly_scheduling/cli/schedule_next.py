"""`firefly-scheduling schedule --next N`: each task's next N fires, with its DST policies.

A cron task's fires are listed in UTC and in its zone, with its effective DST
policies (`dst_gap`, `dst_fold`), and each fire a transition touched is marked:
`shifted` (its wall-clock time fell in a gap and it fires at the gap's end),
`first` or `last` (its wall-clock time happens twice, and this is that pass). An
interval task lists its instants under the chosen host; a `fixed_delay` task under
`run` has none to list (it fires when the host starts, then after each run).

`--json` prints one object per (task, fire); keys in `upcoming_json`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from rich.console import Console
from rich.table import Table

from firefly_scheduling.cli.output import print_table, target_column, text_column
from firefly_scheduling.schedule.dst import DstMark
from firefly_scheduling.schedule.durations import format_duration
from firefly_scheduling.schedule.jitter import jitter_offset_seconds
from firefly_scheduling.schedule.next_fire import Host, cron_schedule_of, next_fire
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

#: What the table says beside a fire a DST transition touched.
MARK_TEXT: dict[DstMark, str] = {
    "shifted": "shifted: its time fell in a DST gap",
    "first": "first pass of a repeated time",
    "last": "second pass of a repeated time",
}


@dataclass(frozen=True)
class UpcomingFire:
    """One future fire of a task, as `schedule --next` lists it."""

    descriptor: ScheduledDescriptor
    instant: datetime
    dst: DstMark | None


def upcoming_fires(
    descriptor: ScheduledDescriptor, host: Host, start: datetime, count: int
) -> Iterator[UpcomingFire]:
    """The first `count` fires of `descriptor` after `start` under `host` (none when unknown)."""
    if descriptor.cron is not None:
        cron = cron_schedule_of(descriptor)
        instant = start
        for _ in range(count):
            instant, mark = cron.next_marked_after(instant)
            yield UpcomingFire(descriptor, instant, mark)
        return
    upcoming = next_fire(descriptor, host, start)
    for _ in range(count):
        if upcoming is None:
            return
        yield UpcomingFire(descriptor, upcoming, None)
        upcoming = next_fire(descriptor, host, upcoming)


def policies_text(descriptor: ScheduledDescriptor) -> str:
    """A cron task's trigger and effective DST policies; an interval task's trigger."""
    if descriptor.cron is None:
        kind = "fixed_rate" if descriptor.fixed_rate is not None else "fixed_delay"
        text = f"{kind} {format_duration(descriptor.fixed_rate or descriptor.fixed_delay or 0.0)}"
    else:
        cron = cron_schedule_of(descriptor)
        text = f"{cron.describe()}\ndst_gap={cron.dst.gap} dst_fold={cron.dst.fold}"
    if descriptor.jitter is not None:
        text += f"\njitter={format_duration(descriptor.jitter)}"
    return text


def upcoming_json(fire: UpcomingFire) -> dict[str, object]:
    """One (task, fire) as a JSON object with stable keys.

    Keys: `target`, `instant` (ISO 8601 UTC), `local` (ISO 8601 in the task's zone;
    null for an interval task), `zone`, `dst_gap` and `dst_fold` (the effective
    policies; null for an interval task), `dst` (null, `shifted`, `first` or `last`)
    and `jitter_offset_seconds` (how long after `instant` the fire starts: its
    `jitter=` offset, 0 for a task without jitter; see `schedule.jitter`).
    """
    descriptor = fire.descriptor
    cron = cron_schedule_of(descriptor) if descriptor.cron is not None else None
    return {
        "target": descriptor.target,
        "instant": fire.instant.isoformat(),
        "local": None if cron is None else fire.instant.astimezone(cron.zone).isoformat(),
        "zone": None if cron is None else cron.zone_name,
        "dst_gap": None if cron is None else cron.dst.gap,
        "dst_fold": None if cron is None else cron.dst.fold,
        "dst": fire.dst,
        "jitter_offset_seconds": jitter_offset_seconds(
            descriptor.target, fire.instant, descriptor.jitter
        ),
    }


def render_upcoming(
    descriptors: Sequence[ScheduledDescriptor],
    console: Console,
    start: datetime,
    host: Host,
    count: int,
) -> None:
    """Print one row per task: its trigger and policies, then its next `count` fires."""
    table = Table(
        title=f"next {count} fires after {start:%Y-%m-%d %H:%M:%S} UTC, as `{host}` runs them",
        title_justify="left",
        show_lines=True,
    )
    rows = [
        (
            descriptor.target,
            policies_text(descriptor),
            "\n".join(_fire_text(fire) for fire in upcoming_fires(descriptor, host, start, count))
            or "when the host starts, then after each run",
        )
        for descriptor in descriptors
    ]
    target_column(table, "Target", (row[0] for row in rows))
    text_column(table, "Schedule and DST policies", (row[1] for row in rows))
    text_column(table, "Next fires", (row[2] for row in rows))
    for row in rows:
        table.add_row(*row)
    print_table(console, table)


def _fire_text(fire: UpcomingFire) -> str:
    text = f"{fire.instant:%Y-%m-%d %H:%M:%S} UTC"
    jitter = fire.descriptor.jitter
    if jitter is not None:
        offset = jitter_offset_seconds(fire.descriptor.target, fire.instant, jitter)
        text += f" +{offset:.3f}s jitter"
    zone = fire.descriptor.zone
    if fire.descriptor.cron is not None and zone not in (None, "UTC"):
        local = fire.instant.astimezone(cron_schedule_of(fire.descriptor).zone)
        text += f" ({local:%Y-%m-%d %H:%M %Z})"
    return text if fire.dst is None else f"{text} {MARK_TEXT[fire.dst]}"
