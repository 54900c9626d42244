"""Which fires of a task the fleet missed, and which of them catch-up runs.

A fire is missed when its instant is in the task's window `(now - catchup, now]`
and the run history holds no record of it at all: not run, not started, not
recorded as skipped by any node. A fleet that was up recorded every fire it did
not run (too late, overlapping, passed over) with its reason, so a node restarted
while others were up finds nothing missed; only a fleet that was down as a whole
leaves instants with no record.

Of the missed fires, the newest `catchup_limit` run, oldest first; the older ones
are recorded as skipped, with a reason that says so. The window is walked back from
now and stops once `catchup_limit + MAX_SKIPS_RECORDED` missed fires are found, so
a long window of a short period costs a bounded walk: the reason then says the
count is a lower bound.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from firefly_scheduling.schedule.fire_instants import (
    cron_fire_at_or_before,
    rate_fire_at_or_before,
    rate_step,
)
from firefly_scheduling.schedule.next_fire import cron_schedule_of
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

#: At most this many missed fires beyond the limit are recorded as skipped per
#: catch-up, the newest of them.
MAX_SKIPS_RECORDED: Final = 10_000
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class CatchUpPlan:
    """The missed fires of one task at `now`: those to run and those recorded as skipped.

    `run` and `skipped` are instants, oldest first; `missed` counts every missed
    fire found (`at_least`: the walk stopped before the window's start).
    """

    now: datetime
    run: tuple[datetime, ...]
    skipped: tuple[datetime, ...]
    missed: int
    at_least: bool
    limit: int

    @property
    def skip_reason(self) -> str:
        """The reason recorded for each fire beyond the limit."""
        more = "more than " if self.at_least else ""
        return (
            f"skipped: beyond catchup_limit={self.limit} of {more}{self.missed} missed fires "
            "(the fleet was down; the newest ran, late)"
        )


def window_start(descriptor: ScheduledDescriptor, now: datetime) -> datetime:
    """The exclusive start of the task's catch-up window at `now`."""
    if descriptor.catchup is None:
        raise ValueError(f"{descriptor.target}: has no catchup= window")
    return now - timedelta(seconds=descriptor.catchup)


def plan_catch_up(
    descriptor: ScheduledDescriptor, now: datetime, recorded: Set[datetime]
) -> CatchUpPlan:
    """The plan of `descriptor` at `now` (aware UTC), given the instants the history
    holds in its window (`RunHistory.recorded_instants`)."""
    limit = descriptor.catchup_limit
    if descriptor.catchup is None or limit is None:
        raise ValueError(f"{descriptor.target}: has no catchup= window")
    start = window_start(descriptor, now)
    at_or_before = instant_at_or_before(descriptor)
    wanted = limit + MAX_SKIPS_RECORDED
    missed: list[datetime] = []
    instant = at_or_before(now)
    while instant > start and len(missed) < wanted:
        if instant not in recorded:
            missed.append(instant)
        instant = at_or_before(instant - _MICROSECOND)
    at_least = (
        len(missed) >= wanted
        and instant > start
        and _any_missed_before(instant, start, recorded, at_or_before)
    )
    missed.reverse()
    cut = max(len(missed) - limit, 0)
    return CatchUpPlan(
        now=now,
        run=tuple(missed[cut:]),
        skipped=tuple(missed[:cut]),
        missed=len(missed),
        at_least=at_least,
        limit=limit,
    )


def _any_missed_before(
    instant: datetime,
    start: datetime,
    recorded: Set[datetime],
    at_or_before: Callable[[datetime], datetime],
) -> bool:
    """Whether an instant at or before `instant`, after `start`, is missed too."""
    while instant > start:
        if instant not in recorded:
            return True
        instant = at_or_before(instant - _MICROSECOND)
    return False


def instant_at_or_before(descriptor: ScheduledDescriptor) -> Callable[[datetime], datetime]:
    """The task's latest scheduled instant at or before a given one (cron or rate)."""
    if descriptor.cron is not None:
        schedule = cron_schedule_of(descriptor)
        return lambda instant: cron_fire_at_or_before(schedule, instant)
    if descriptor.fixed_rate is None:
        raise ValueError(f"{descriptor.target}: has no schedule instants (a fixed_delay task)")
    step = rate_step(descriptor.fixed_rate)
    return lambda instant: rate_fire_at_or_before(step, instant)
