"""TickHost on a fake clock: what is due in a minute, sub-minute repeats, overlaps, failures."""

from __future__ import annotations

import itertools
import logging
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks
from firefly_fake_clock import FakeClock

from firefly_scheduling import InMemoryLock, ScheduledDescriptor, Settings
from firefly_scheduling.fires.outcome import Verdict
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.tick import TickHost
from firefly_scheduling.schedule.jitter import jitter_offset

MODULE = "firefly_host_unit_tasks"
REAL_PAUSE = 0.05


def task(name: str, **trigger: object) -> ScheduledDescriptor:
    return ScheduledDescriptor(target=f"{MODULE}:{name}", **trigger)  # type: ignore[arg-type]


def host(
    descriptors: list[ScheduledDescriptor], at: datetime, *, grace_period: float = 5.0
) -> TickHost:
    runtime = build_runtime(descriptors, Settings(lock_provider="memory"), host="tick", node="t")
    return TickHost(descriptors, runtime, clock=FakeClock(at), grace_period=grace_period)


@pytest.fixture(autouse=True)
def _fresh_calls() -> Iterator[None]:
    tasks.reset()
    yield
    tasks.reset()


MINUTE = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)  # a Wednesday


def test_the_plan_holds_matching_crons_and_aligned_cadences() -> None:
    descriptors = [
        task("ping", cron="* * * * *"),
        task("pong", cron="5 * * * *"),  # not this minute
        task("slow", fixed_rate=12.0),  # every 15 s
        task("boom", fixed_rate=3600.0),  # hourly: 12:00 is aligned
        task("Service.work", fixed_delay=7 * 60.0),  # every 10 min: aligned too
    ]
    plan = host(descriptors, MINUTE).plan(MINUTE)
    assert [(slot.fire.target.partition(":")[2], slot.fire.instant.second) for slot in plan] == [
        ("Service.work", 0),
        ("boom", 0),
        ("ping", 0),
        ("slow", 0),
        ("slow", 15),
        ("slow", 30),
        ("slow", 45),
    ]
    later = host(descriptors, MINUTE).plan(MINUTE + timedelta(minutes=1))
    assert {slot.fire.target for slot in later} == {f"{MODULE}:ping", f"{MODULE}:slow"}


def test_a_tick_runs_sub_minute_cadences_until_the_minute_ends() -> None:
    tick = host([task("ping", fixed_rate=15.0), task("pong", cron="* * * * *")], MINUTE)
    report = tick.run()
    assert len(tasks.calls("ping")) == 4
    assert len(tasks.calls("pong")) == 1
    assert [r.fire.instant.second for r in report.results if r.fire.target.endswith("ping")] == [
        0,
        15,
        30,
        45,
    ]
    assert all(result.verdict is Verdict.SUCCEEDED for result in report.results)
    assert tick.clock.slept == pytest.approx(45)  # type: ignore[attr-defined]


def test_a_tick_started_late_skips_the_slots_already_past() -> None:
    tick = host([task("ping", fixed_rate=10.0)], MINUTE + timedelta(seconds=25))
    report = tick.run()
    assert [r.fire.instant.second for r in report.results] == [20, 30, 40, 50]
    assert [slot.fire.instant.second for slot in report.missed] == [0, 10]


def test_a_failing_task_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    report = host([task("boom", cron="* * * * *"), task("ping", cron="* * * * *")], MINUTE).run()
    verdicts = {r.fire.target.partition(":")[2]: r.verdict for r in report.results}
    assert verdicts == {"boom": Verdict.FAILED, "ping": Verdict.SUCCEEDED}
    assert any("boom" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)


def test_a_body_past_its_timeout_is_timed_out_and_the_pass_exits_1() -> None:
    report = host(
        [
            task("overrun", cron="* * * * *", lock_name="overrun", lock_ttl=30.0, timeout=0.2),
            task("ping", cron="* * * * *"),
        ],
        MINUTE,
    ).run()
    verdicts = {r.fire.target.partition(":")[2]: r.verdict for r in report.results}
    assert verdicts == {"overrun": Verdict.TIMED_OUT, "ping": Verdict.SUCCEEDED}
    assert len(tasks.calls("overrun")) == 1  # it ran to its end
    assert [r.fire.target for r in report.problems()] == [f"{MODULE}:overrun"]
    assert report.exit_status == 1
    [row] = [row for row in report.rows() if row["verdict"] == "timed_out"]
    assert row["error"] == "timed out after 200ms"


def test_a_coroutine_body_past_its_timeout_is_cancelled_by_the_tick_pass() -> None:
    began = time.monotonic()
    tick = host([task("overrun_async", cron="* * * * *", timeout=0.2)], MINUTE)
    try:
        report = tick.run()
    finally:
        tick.runtime.close()  # its event loop thread, started for the coroutine body
    [result] = report.results
    assert (result.verdict, result.error) == (Verdict.TIMED_OUT, "timed out after 200ms")
    assert tasks.calls("overrun_async") == []  # cancelled in its sleep
    assert time.monotonic() - began < 30.0  # not after its whole sleep
    assert report.exit_status == 1


def test_a_task_lock_held_elsewhere_skips_the_run_as_overlapping() -> None:
    descriptor = task("ping", cron="* * * * *", lock_name="shared", lock_ttl=30.0)
    other_node = InMemoryLock()
    assert other_node.try_acquire("shared", 30)
    try:
        report = host([descriptor], MINUTE).run()
    finally:
        other_node.release("shared")
    [result] = report.results
    assert result.verdict is Verdict.OVERLAPPING
    assert not result.ran
    assert tasks.calls("ping") == []


def test_a_second_tick_for_the_same_minute_finds_the_fire_claimed_elsewhere() -> None:
    descriptor = task("ping", cron="* * * * *", lock_name="claimed", lock_ttl=30.0)
    first = host([descriptor], MINUTE).run()
    second = host([descriptor], MINUTE).run()
    assert [r.verdict for r in first.results] == [Verdict.SUCCEEDED]
    assert [r.verdict for r in second.results] == [Verdict.CLAIMED_ELSEWHERE]
    assert second.summary() == "tick 2026-06-03 12:00 UTC: 1 claimed elsewhere"
    assert len(tasks.calls("ping")) == 1


def test_runs_of_one_task_never_overlap_in_a_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "SLOW_SECONDS", 6 * REAL_PAUSE)
    # The fake clock reaches a 5 s slot every REAL_PAUSE; each body lasts six of them.
    report = host([task("slow", fixed_rate=5.0)], MINUTE).run()
    runs = sorted(tasks.calls("slow"), key=lambda call: call[1])
    assert report.overlapping
    assert len(runs) + len(report.overlapping) == 12
    assert all(after[1] >= before[2] for before, after in itertools.pairwise(runs))


def test_three_ticks_of_a_minute_run_a_locked_fixed_delay_task_once() -> None:
    delayed = task("ping", fixed_delay=300.0, lock_name="fixed-delay-once", lock_ttl=30.0)
    verdicts = [host([delayed], MINUTE).run().results[0].verdict for _ in range(3)]
    assert verdicts == [
        Verdict.SUCCEEDED,
        Verdict.CLAIMED_ELSEWHERE,
        Verdict.CLAIMED_ELSEWHERE,
    ]
    assert len(tasks.calls("ping")) == 1


def test_a_sunday_cron_is_due_on_sunday_in_its_zone_not_on_monday() -> None:
    weekly = task("ping", cron="0 3 * * 0", zone="America/New_York")
    sunday_3am_new_york = datetime(2026, 6, 7, 7, 0, tzinfo=UTC)  # EDT is UTC-4
    assert [s.fire.instant for s in host([weekly], MINUTE).plan(sunday_3am_new_york)] == [
        sunday_3am_new_york
    ]
    assert host([weekly], MINUTE).plan(sunday_3am_new_york + timedelta(days=1)) == []
    assert host([weekly], MINUTE).plan(sunday_3am_new_york - timedelta(hours=4)) == []


def test_a_cron_in_a_spring_forward_gap_is_due_once_right_after_it() -> None:
    nightly = task("ping", cron="30 2 * * *", zone="Europe/Paris")
    tick = host([nightly], MINUTE)
    day = datetime(2026, 3, 29, tzinfo=UTC)
    due = [
        minute
        for minute in (day + timedelta(minutes=m) for m in range(0, 24 * 60))
        if tick.plan(minute)
    ]
    assert due == [datetime(2026, 3, 29, 1, 0, tzinfo=UTC)]  # 03:00 CEST


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"dst_gap": "skip"}, []),
        ({"dst_fold": "last"}, [datetime(2026, 10, 25, 1, 30, tzinfo=UTC)]),
        ({"dst_fold": "both"}, [datetime(2026, 10, 25, h, 30, tzinfo=UTC) for h in (0, 1)]),
    ],
)
def test_tick_plans_the_dst_policy_of_each_task(
    policy: dict[str, str], expected: list[datetime]
) -> None:
    nightly = task("ping", cron="30 2 * * *", zone="Europe/Paris", **policy)
    tick = host([nightly], MINUTE)
    day = datetime(2026, 3 if "dst_gap" in policy else 10, 29 if "dst_gap" in policy else 25)
    minutes = (day.replace(tzinfo=UTC) + timedelta(minutes=m) for m in range(0, 24 * 60))
    assert [minute for minute in minutes if tick.plan(minute)] == expected


def test_an_initially_delayed_task_is_held_back_under_tick() -> None:
    delayed = task("ping", cron="* * * * *", initial_delay=120.0)
    report = host([delayed], MINUTE).run()
    assert [r.verdict for r in report.results] == [Verdict.HELD_BACK]
    assert [r.verdict for r in report.results] == [Verdict.HELD_BACK]
    assert tasks.calls("ping") == []


def test_tick_warns_as_it_builds_when_delayed_tasks_have_a_per_process_store(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    delayed = task("ping", cron="* * * * *", initial_delay=120.0)
    build_runtime([delayed], Settings(), host="tick", node="test")
    assert any(
        "never run" in r.getMessage() and delayed.target in r.getMessage() for r in caplog.records
    )
    caplog.clear()
    build_runtime([delayed], Settings(), host="run", node="test")
    assert not any("never run" in r.getMessage() for r in caplog.records)


def test_the_report_summarises_the_minute() -> None:
    report = host([task("ping", cron="* * * * *"), task("boom", cron="* * * * *")], MINUTE).run()
    assert report.summary() == "tick 2026-06-03 12:00 UTC: 1 failed; 1 succeeded"


class StoppingClock(FakeClock):
    """Requests the host's stop once the fake time reaches `stop_at` (as SIGTERM would)."""

    def __init__(self, now: datetime, stop_at: datetime) -> None:
        super().__init__(now)
        self.stop_at = stop_at
        self.host: TickHost | None = None

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.host is not None and self.current >= self.stop_at:
            self.host.request_stop()


def stopping_host(
    descriptors: list[ScheduledDescriptor], stop_at: datetime, grace_period: float
) -> TickHost:
    runtime = build_runtime(descriptors, Settings(lock_provider="memory"), host="tick", node="t")
    clock = StoppingClock(MINUTE, stop_at)
    tick = TickHost(descriptors, runtime, clock=clock, grace_period=grace_period)
    clock.host = tick
    return tick


def test_a_stop_request_starts_no_further_slot() -> None:
    tick = stopping_host([task("ping", fixed_rate=15.0)], MINUTE + timedelta(seconds=20), 5.0)
    report = tick.run()
    assert [r.fire.instant.second for r in report.results] == [0, 15]
    assert [slot.fire.instant.second for slot in report.not_started] == [30, 45]
    assert report.stopped
    assert report.abandoned == []
    assert len(tasks.calls("ping")) == 2
    assert report.summary() == (
        "tick 2026-06-03 12:00 UTC: 2 succeeded; stopped early: 2 slot(s) not started, "
        "0 run(s) abandoned"
    )


def test_a_stop_request_lets_a_running_body_finish_within_the_grace_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "SLOW_SECONDS", 0.5)
    slow = task("slow", fixed_rate=30.0, lock_name="graceful", lock_ttl=30.0)
    report = stopping_host([slow], MINUTE + timedelta(seconds=1), 5.0).run()
    assert [r.verdict for r in report.results] == [Verdict.SUCCEEDED]
    assert len(tasks.calls("slow")) == 1  # finished, not cut short
    assert [slot.fire.instant.second for slot in report.not_started] == [30]
    probe = InMemoryLock()
    assert probe.try_acquire("graceful", 1)  # released by the fire runner
    probe.release("graceful")


def test_a_body_outliving_the_grace_period_is_abandoned_with_its_lock_still_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tasks, "SLOW_SECONDS", 1.5)
    slow = task("slow", fixed_rate=30.0, lock_name="abandoned", lock_ttl=30.0)
    began = time.monotonic()
    report = stopping_host([slow], MINUTE + timedelta(seconds=1), 0.2).run()
    assert time.monotonic() - began < 1.5  # it did not wait for the body
    assert report.stopped
    assert len(report.abandoned) == 1
    assert report.results == []
    # the host released it while the body still ran, so another node could
    # start the task beside it. The lock now ends with the process (or its TTL).
    assert not InMemoryLock().try_acquire("abandoned", 1)
    deadline = time.monotonic() + 5
    while not tasks.calls("slow") and time.monotonic() < deadline:
        time.sleep(0.05)  # let the abandoned thread end before the next test


def test_a_tick_starts_each_jittered_fire_at_its_offset_and_names_it_by_its_instant() -> None:
    ping = task("ping", fixed_rate=15.0, jitter=10.0)
    report = host([ping], MINUTE).run()
    assert [r.fire.instant.second for r in report.results] == [0, 15, 30, 45]
    for result in report.results:
        offset = jitter_offset(ping.target, result.fire.instant, 10.0)
        assert result.started_at is not None
        assert result.started_at >= result.fire.instant + offset
    assert len(tasks.calls("ping")) == 4


def test_a_tick_waits_past_its_minute_for_a_jitter_longer_than_a_minute() -> None:
    pong = task("pong", cron="*/5 * * * *", jitter=240.0)
    tick = host([pong], MINUTE)
    due = MINUTE + jitter_offset(pong.target, MINUTE, 240.0)
    report = tick.run()
    [result] = report.results
    assert result.fire.instant == MINUTE
    assert result.started_at is not None
    assert result.started_at >= due
    assert tick.clock.slept == pytest.approx((due - MINUTE).total_seconds())  # type: ignore[attr-defined]
