"""Fire instants and the APScheduler triggers built on them (crontab semantics, DST)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.cron import CronTrigger

from firefly_scheduling.hosts.apscheduler.jobs import trigger_for
from firefly_scheduling.hosts.apscheduler.triggers import (
    CronScheduleTrigger,
    EpochAlignedRateTrigger,
)
from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.fire_instants import (
    cron_fire_at_or_before,
    rate_fire_after,
    rate_fire_at_or_before,
    rate_step,
)
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

PARIS = ZoneInfo("Europe/Paris")
NEW_YORK = ZoneInfo("America/New_York")


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def fires(
    trigger: CronScheduleTrigger | EpochAlignedRateTrigger, now: datetime, count: int
) -> list[datetime]:
    found, previous = [], None
    for _ in range(count):
        previous = trigger.get_next_fire_time(previous, now)
        assert previous is not None
        found.append(previous)
    return found


def test_rate_instants_are_multiples_of_the_rate_since_the_epoch() -> None:
    step = rate_step(7)
    instant = utc(2026, 3, 1, 12, 0, 3)
    before = rate_fire_at_or_before(step, instant)
    assert (before - utc(1970, 1, 1)) % step == timedelta(0)
    assert before <= instant < before + step
    assert rate_fire_after(step, before) == before + step
    assert rate_fire_at_or_before(step, before) == before


def test_every_node_names_the_same_instant_whenever_it_woke_up() -> None:
    step = rate_step(0.25)
    base = utc(2026, 3, 1, 12, 0, 0)
    woke = [base + timedelta(milliseconds=ms) for ms in (0, 1, 120, 249)]
    assert {rate_fire_at_or_before(step, instant) for instant in woke} == {base}


def test_the_rate_trigger_fires_exactly_on_sub_second_instants() -> None:
    trigger = EpochAlignedRateTrigger(0.25)
    now = utc(2026, 3, 1, 12, 0, 0) + timedelta(milliseconds=10)
    assert fires(trigger, now, 4) == [
        utc(2026, 3, 1, 12, 0, 0) + timedelta(milliseconds=ms) for ms in (250, 500, 750, 1000)
    ]
    assert trigger.get_next_fire_time(None, utc(2026, 3, 1, 12, 0, 0)) == utc(2026, 3, 1, 12, 0, 0)
    assert trigger.fire_at_or_before(now) == utc(2026, 3, 1, 12, 0, 0)


def test_a_sunday_cron_fires_on_sunday_unlike_apschedulers_from_crontab() -> None:
    schedule = CronSchedule.parse("0 3 * * 0", "America/New_York", source="test")
    trigger = CronScheduleTrigger(schedule)
    wednesday = utc(2026, 6, 3, 12, 0)
    sundays = [fire.astimezone(NEW_YORK) for fire in fires(trigger, wednesday, 3)]
    assert [(d.strftime("%A"), d.hour, d.minute) for d in sundays] == [("Sunday", 3, 0)] * 3
    # The pitfall this trigger exists for: APScheduler 3 reads day-of-week 0 as Monday.
    pitfall = CronTrigger.from_crontab("0 3 * * 0", timezone=NEW_YORK)
    assert pitfall.get_next_fire_time(None, wednesday).strftime("%A") == "Monday"


def test_day_of_week_7_is_sunday_too() -> None:
    trigger = CronScheduleTrigger(CronSchedule.parse("30 6 * * 7", None, source="test"))
    fire = trigger.get_next_fire_time(None, utc(2026, 6, 3))
    assert fire is not None
    assert fire.strftime("%A %H:%M") == "Sunday 06:30"


def test_a_daily_cron_keeps_its_wall_clock_time_across_dst() -> None:
    # Europe/Paris springs forward on 2026-03-29: 09:00 local is 08:00 UTC, then 07:00 UTC.
    trigger = CronScheduleTrigger(CronSchedule.parse("0 9 * * *", "Europe/Paris", source="test"))
    days = fires(trigger, utc(2026, 3, 27, 12, 0), 3)
    assert [fire.astimezone(PARIS).hour for fire in days] == [9, 9, 9]
    assert [fire.hour for fire in days] == [8, 7, 7]


def test_a_time_in_the_spring_forward_gap_fires_once_right_after_it() -> None:
    trigger = CronScheduleTrigger(CronSchedule.parse("30 2 * * *", "Europe/Paris", source="test"))
    fire = trigger.get_next_fire_time(None, utc(2026, 3, 28, 12, 0))
    assert fire == utc(2026, 3, 29, 1, 0)  # 03:00 CEST, the first instant after the gap
    assert trigger.get_next_fire_time(fire, fire) == utc(2026, 3, 30, 0, 30)


def test_a_repeated_hour_runs_a_fixed_time_task_once() -> None:
    # Europe/Paris falls back on 2026-10-25: 02:30 happens twice.
    trigger = CronScheduleTrigger(CronSchedule.parse("30 2 * * *", "Europe/Paris", source="test"))
    first, second = fires(trigger, utc(2026, 10, 24, 12, 0), 2)
    assert first == utc(2026, 10, 25, 0, 30)
    assert second == utc(2026, 10, 26, 1, 30)


@pytest.mark.parametrize("late", [timedelta(0), timedelta(seconds=59), timedelta(minutes=30)])
def test_a_late_cron_wake_up_names_the_fire_it_belongs_to(late: timedelta) -> None:
    schedule = CronSchedule.parse("*/5 * * * *", None, source="test")
    fire = utc(2026, 6, 3, 12, 5)
    expected = fire + (late // timedelta(minutes=5)) * timedelta(minutes=5)
    assert cron_fire_at_or_before(schedule, fire + late) == expected
    assert CronScheduleTrigger(schedule).fire_at_or_before(fire + late) == expected


def test_the_resident_trigger_follows_the_task_dst_policy() -> None:
    descriptor = ScheduledDescriptor(
        target="app.tasks:nightly", cron="30 2 * * *", zone="Europe/Paris", dst_fold="last"
    )
    first, second = fires(trigger_for(descriptor), utc(2026, 10, 24, 12, 0), 2)
    assert first == utc(2026, 10, 25, 1, 30)  # 02:30 CET, the second pass
    assert second == utc(2026, 10, 26, 1, 30)
