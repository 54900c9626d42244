"""Which instants of a task's schedule a backfill of `[start, end)` runs.

An instant of the window runs unless the run history holds a successful run of it
(`SUCCESS_STATES`): one read of the window's successful instants, then the schedule
walked back from `end`. A skipped, failed, expired or never recorded instant is run
again; a success is never run twice, so asking for the same backfill twice runs
nothing twice. The walk is bounded (`MAX_BACKFILL_INSTANTS`): a longer window is
refused when asked, naming how many instants it holds at least.
"""

from __future__ import annotations

from collections.abc import Set
from datetime import datetime, timedelta
from typing import Final

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.catch_up_plan import instant_at_or_before
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

#: The most instants one backfill request may cover.
MAX_BACKFILL_INSTANTS: Final = 100_000
_MICROSECOND = timedelta(microseconds=1)


def schedule_instants(
    descriptor: ScheduledDescriptor, start: datetime, end: datetime
) -> list[datetime]:
    """The task's scheduled instants in `[start, end)` (aware UTC), oldest first.

    A `ConfigurationError` for a task without schedule instants (`fixed_delay`) or a
    window of more than `MAX_BACKFILL_INSTANTS`, naming the task and the window.
    """
    if descriptor.cron is None and descriptor.fixed_rate is None:
        raise ConfigurationError(
            f"{descriptor.target}: a backfill needs a cron or fixed_rate task; a fixed_delay "
            "task has no schedule instants to replay"
        )
    at_or_before = instant_at_or_before(descriptor)
    found: list[datetime] = []
    instant = at_or_before(end - _MICROSECOND)
    while instant >= start:
        if len(found) == MAX_BACKFILL_INSTANTS:
            raise ConfigurationError(
                f"{descriptor.target}: the backfill window [{start.isoformat()}, "
                f"{end.isoformat()}) holds more than {MAX_BACKFILL_INSTANTS} instants; "
                "ask for shorter windows"
            )
        found.append(instant)
        instant = at_or_before(instant - _MICROSECOND)
    found.reverse()
    return found


def instants_to_run(instants: list[datetime], succeeded: Set[datetime]) -> list[datetime]:
    """Those of `instants` (oldest first) without a successful run, oldest first."""
    return [instant for instant in instants if instant not in succeeded]
