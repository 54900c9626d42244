"""Jitter: the offset a fire of a task with `jitter=` starts after its instant.

The offset is a pure function of the task's target, the fire's instant and the
jitter, so every node (and a node that restarts) computes the same one, waits the
same time and claims the same fire:

    offset = floor(h * J / 2**64) microseconds, in [0, J)

where `J` is the jitter in whole microseconds and `h` the first 8 bytes (big-endian)
of the SHA-256 of `"<target>|<instant in UTC, ISO 8601>"`. Integer arithmetic only:
no float rounding, no `random`, no `hash()` (salted per process by PYTHONHASHSEED),
no local time zone.

The offset only moves the start: the fire keeps its instant as its name (claim,
history row, `current_fire().instant`), and its lateness counts from
`instant + offset` (`Fire.due`).

`shortest_cron_gap` bounds a cron task's jitter at boot: a jitter as long as the gap
between two instants could start a later fire before an earlier one.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING

from firefly_scheduling.schedule.instants import as_utc

if TYPE_CHECKING:  # only its methods are used: a fire's offset needs no cron parser
    from firefly_scheduling.schedule.cron import CronSchedule

_HASH_SPAN = 1 << 64
#: The cron gap scan looks at the year from here (fixed: every node and boot agrees).
GAP_SCAN_START = datetime(2026, 1, 1, tzinfo=UTC)
GAP_SCAN_SPAN = timedelta(days=366)
#: Instants looked at from the start, and around each change of the zone's offset.
GAP_SCAN_INSTANTS = 100
_HOUR = timedelta(hours=1)


def jitter_offset(target: str, instant: datetime, jitter: float) -> timedelta:
    """The offset of the fire of `target` at `instant` (aware) for `jitter` seconds."""
    span = round(jitter * 1_000_000)
    if span <= 0:
        raise ValueError(f"{target}: jitter must be positive, got {jitter!r}")
    key = f"{target}|{as_utc(instant).isoformat()}".encode()
    drawn = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
    return timedelta(microseconds=drawn * span // _HASH_SPAN)


def jitter_offset_seconds(target: str, instant: datetime, jitter: float | None) -> float:
    """`jitter_offset` in seconds; 0.0 for a task without jitter."""
    if jitter is None:
        return 0.0
    return jitter_offset(target, instant, jitter).total_seconds()


@lru_cache(maxsize=256)
def shortest_cron_gap(schedule: CronSchedule) -> float:
    """The shortest time in seconds between two consecutive instants of `schedule`.

    Read from its instants in the year from `GAP_SCAN_START`: the first
    `GAP_SCAN_INSTANTS` of them (a cron repeats its minute and hour pattern well
    within that many, or has fewer in a year), and as many around each change of its
    zone's offset that year, where a repeated hour (`dst_fold="both"`) or a shifted
    time (`dst_gap="shift"`) brings two fires closer than anywhere else.
    """
    first = schedule.next_after(GAP_SCAN_START)
    shortest = _shortest_gap_from(schedule, first, GAP_SCAN_START + GAP_SCAN_SPAN)
    for change in _offset_changes(schedule, GAP_SCAN_START, GAP_SCAN_SPAN):
        # From the last instant before the change's window: a shifted fire's gap to
        # the fire before it (a day earlier, for a daily cron) is measured too.
        before = schedule.latest_at_or_before(change - 3 * _HOUR)
        shortest = min(shortest, _shortest_gap_from(schedule, before, change + 3 * _HOUR))
    return shortest


def _shortest_gap_from(schedule: CronSchedule, first: datetime, end: datetime) -> float:
    """The shortest gap between consecutive instants from `first` to the first past `end`
    (at least one gap, at most `GAP_SCAN_INSTANTS`)."""
    shortest = float("inf")
    previous = first
    for _ in range(GAP_SCAN_INSTANTS):
        following = schedule.next_after(previous)
        shortest = min(shortest, (following - previous).total_seconds())
        if following > end:
            break
        previous = following
    return shortest


def _offset_changes(schedule: CronSchedule, start: datetime, span: timedelta) -> list[datetime]:
    """The hours (UTC) in `[start, start + span)` at which the schedule's zone changes offset."""
    zone = schedule.zone
    changes: list[datetime] = []
    day = start
    while day < start + span:
        following = day + timedelta(days=1)
        if day.astimezone(zone).utcoffset() != following.astimezone(zone).utcoffset():
            hour = day
            while hour.astimezone(zone).utcoffset() == day.astimezone(zone).utcoffset():
                hour += _HOUR
            changes.append(hour)
        day = following
    return changes
