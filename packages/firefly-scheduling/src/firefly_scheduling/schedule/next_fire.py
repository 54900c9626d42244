"""When each host will next fire a task: what `firefly-scheduling schedule` shows.

The two hosts differ for interval tasks. `run` keeps the exact interval: a
`fixed_rate` fires at the next epoch-aligned multiple of the rate, a `fixed_delay`
first when the host starts and then that long after each run ends (so it has no
instant to show in advance). `tick` runs the cadence bucket the interval rounds up
to, aligned to the epoch. Cron tasks fire at the same instants under both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from firefly_scheduling.schedule.cadence import Cadence
from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.fire_instants import rate_fire_after, rate_step
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

Host = Literal["run", "tick"]
HOSTS: tuple[Host, ...] = ("run", "tick")


def next_fire(descriptor: ScheduledDescriptor, host: Host, now: datetime) -> datetime | None:
    """The first fire of `descriptor` after `now` under `host` (aware UTC), if known ahead.

    None only for a `fixed_delay` task under `run`, whose fires follow its runs.
    """
    if descriptor.cron is not None:
        return cron_schedule_of(descriptor).next_after(now)
    if host == "tick":
        return cadence_of(descriptor).next_after(now)
    if descriptor.fixed_rate is not None:
        return rate_fire_after(rate_step(descriptor.fixed_rate), now)
    return None


def cron_schedule_of(descriptor: ScheduledDescriptor) -> CronSchedule:
    """The parsed cron of a cron task, in its zone, with its DST policy."""
    if descriptor.cron is None:
        raise ValueError(f"{descriptor.target} is an interval task; it has no cron")
    return CronSchedule.parse(
        descriptor.cron,
        descriptor.zone,
        source=descriptor.target,
        dst_gap=descriptor.dst_gap,
        dst_fold=descriptor.dst_fold,
    )


def cadence_of(descriptor: ScheduledDescriptor) -> Cadence:
    """The bucket a `fixed_rate`/`fixed_delay` task runs on under `tick`."""
    rate = descriptor.fixed_rate if descriptor.fixed_rate is not None else descriptor.fixed_delay
    if rate is None:
        raise ValueError(f"{descriptor.target} is a cron task; it has no cadence")
    return Cadence.of_seconds(rate)
