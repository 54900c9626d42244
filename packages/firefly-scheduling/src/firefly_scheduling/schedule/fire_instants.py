"""Name each fire by its scheduled instant, identically on every node.

A fire is identified by the instant it was scheduled for, not by the wall clock at
which a node happened to wake up:

* `fixed_rate`: instants `k * rate` from the Unix epoch, so every node, whenever it
  started, names the same instants (a 1 s rate fires on whole seconds);
* cron: the latest instant the schedule has at or before the wake-up, in UTC (never
  the wake-up's own minute when the schedule has no fire there);
* `fixed_delay`: the end of the previous run on this node plus the delay. It is
  per node by nature: nodes do not share "the end of the previous run".

Arithmetic is on integer microseconds (`timedelta // timedelta`), never on float
seconds near 1.7e9, whose rounding would make two nodes disagree.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.instants import as_utc

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# An on-time cron wake-up finds its fire within this window, forwards from its start.
_FAST_LOOKBACK = timedelta(minutes=1)


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
    """The latest fire of `schedule` not after `instant`: always a scheduled instant.

    Called when a cron job wakes up, to name the fire it belongs to. An on-time wake-up
    finds it within the last minute (the fast path). A late one, however late (a
    process suspended for days, a weekly task woken on a Wednesday), gets the true
    latest scheduled instant, which the fire runner's grace then skips as too late:
    a fire is never run at an instant its schedule does not have.
    """
    now = as_utc(instant)
    fire = schedule.next_after(now - _FAST_LOOKBACK)
    if fire > now:
        return schedule.latest_at_or_before(now)
    following = schedule.next_after(fire)
    while following <= now:
        fire, following = following, schedule.next_after(following)
    return fire


def minute_start(instant: datetime) -> datetime:
    """The start of the UTC minute containing `instant`."""
    return as_utc(instant).replace(second=0, microsecond=0)
