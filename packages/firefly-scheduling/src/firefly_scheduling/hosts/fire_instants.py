"""Name each fire by its scheduled instant, identically on every node.

A fire is identified by the instant it was scheduled for, not by the wall clock at
which a node happened to wake up:

* `fixed_rate`: instants `k * rate` from the Unix epoch, so every node, whenever it
  started, names the same instants (a 1 s rate fires on whole seconds);
* cron: the matched minute, in UTC;
* `fixed_delay`: the end of the previous run on this node plus the delay. It is
  per node by nature: nodes do not share "the end of the previous run".

Arithmetic is on integer microseconds (`timedelta // timedelta`), never on float
seconds near 1.7e9, whose rounding would make two nodes disagree.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from firefly_scheduling.cron import CronSchedule
from firefly_scheduling.instants import as_utc

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MINUTE = timedelta(minutes=1)
# How far back to look for the cron fire a late wake-up belongs to. An on-time fire
# is found in the first window; the longer ones only serve a stalled process.
_CRON_LOOKBACKS = (_MINUTE, timedelta(hours=1), timedelta(days=1))


def rate_step(rate_seconds: float) -> timedelta:
    """`rate_seconds` as a whole number of microseconds (at least one)."""
    return max(timedelta(seconds=rate_seconds), _MICROSECOND)


def rate_fire_at_or_before(step: timedelta, instant: datetime) -> datetime:
    """The latest epoch-aligned instant `k * step` not after `instant`."""
    return EPOCH + step * ((as_utc(instant) - EPOCH) // step)


def rate_fire_after(step: timedelta, instant: datetime) -> datetime:
    """The first epoch-aligned instant `k * step` strictly after `instant`."""
    return rate_fire_at_or_before(step, instant) + step


def cron_fire_at_or_before(schedule: CronSchedule, instant: datetime) -> datetime:
    """The latest fire of `schedule` not after `instant` (a UTC minute).

    Called when a cron job wakes up, to name the fire it belongs to. Falls back to
    the minute containing `instant` when no fire lies within the last day, which only
    a process suspended for longer than that can see.
    """
    now = as_utc(instant)
    for lookback in _CRON_LOOKBACKS:
        fire = schedule.next_after(now - lookback)
        if fire <= now:
            following = schedule.next_after(fire)
            while following <= now:
                fire, following = following, schedule.next_after(following)
            return fire
    return now.replace(second=0, microsecond=0)


def minute_start(instant: datetime) -> datetime:
    """The start of the UTC minute containing `instant`."""
    return as_utc(instant).replace(second=0, microsecond=0)
