"""`jitter=`: the offset (deterministic, in range, the same in every process), the
bounds refused at boot, lateness counted from instant + offset, and the start never
before it (resident trigger, tick, and the runner itself).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from firefly_scheduling import ConfigurationError, ScheduledDescriptor, scheduled
from firefly_scheduling.fires.outcome import Fire, TriggerKind, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.hosts.apscheduler.jobs import trigger_for
from firefly_scheduling.hosts.apscheduler.triggers import JitteredTrigger
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.schedule.cron import CronSchedule
from firefly_scheduling.schedule.jitter import jitter_offset, shortest_cron_gap
from firefly_scheduling.tasks.manifest_format import decode, encode
from firefly_scheduling.tasks.validation import validate_descriptor

T0 = datetime(2030, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def locked_task(**fields: Any) -> ScheduledDescriptor:
    """A locked task with a unique name (the memory lock is process-wide)."""
    target = f"tests.jitter_{uuid.uuid4().hex}:job"
    return ScheduledDescriptor(target=target, lock_name=target, lock_ttl=30.0, **fields)


# -- the offset --------------------------------------------------------------------


def test_the_offset_is_deterministic_and_within_zero_to_jitter() -> None:
    offsets = [jitter_offset("app.jobs:pull", T0 + k * MINUTE, 30.0) for k in range(500)]
    assert offsets == [jitter_offset("app.jobs:pull", T0 + k * MINUTE, 30.0) for k in range(500)]
    assert all(timedelta(0) <= offset < timedelta(seconds=30) for offset in offsets)
    # Spread over the range, not stuck at one end.
    assert min(offsets) < timedelta(seconds=3)
    assert max(offsets) > timedelta(seconds=27)


def test_the_offset_differs_across_instants_and_tasks() -> None:
    by_instant = {jitter_offset("app.jobs:pull", T0 + k * MINUTE, 30.0) for k in range(100)}
    by_task = {jitter_offset(f"app.jobs:pull{k}", T0, 30.0) for k in range(100)}
    assert len(by_instant) > 95
    assert len(by_task) > 95


def test_the_offset_names_the_instant_not_its_zone() -> None:
    paris = T0.astimezone(CronSchedule.parse("* * * * *", "Europe/Paris", source="t").zone)
    assert jitter_offset("app.jobs:pull", paris, 30.0) == jitter_offset("app.jobs:pull", T0, 30.0)


_COMPUTE = (
    "import json, sys\n"
    "from datetime import datetime\n"
    "from firefly_scheduling.schedule.jitter import jitter_offset\n"
    "print(json.dumps([jitter_offset(t, datetime.fromisoformat(i), 45.0).total_seconds()"
    " for t, i in json.loads(sys.argv[1])]))\n"
)


def test_every_process_computes_the_same_offsets_whatever_its_hash_seed_and_zone() -> None:
    cases = [(f"app.jobs:task{k}", (T0 + k * MINUTE).isoformat()) for k in range(20)]
    outputs = []
    for seed, zone in (("1", "Pacific/Auckland"), ("98765", "America/Los_Angeles")):
        env = {**os.environ, "PYTHONHASHSEED": seed, "TZ": zone}
        done = subprocess.run(
            [sys.executable, "-c", _COMPUTE, json.dumps(cases)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.append(json.loads(done.stdout))
    here = [jitter_offset(t, datetime.fromisoformat(i), 45.0).total_seconds() for t, i in cases]
    assert outputs[0] == outputs[1] == here


def test_a_fire_keeps_its_instant_and_is_due_at_the_offset() -> None:
    task = locked_task(fixed_rate=60.0, jitter=30.0)
    fire = Fire.at(task, T0)
    assert fire.instant == T0
    assert fire.due == T0 + jitter_offset(task.target, T0, 30.0)
    assert Fire.at(locked_task(fixed_rate=60.0), T0).due == T0  # no jitter, no offset
    assert Fire.at(task, T0, TriggerKind.MANUAL).due == T0  # an operator's run: now


# -- the bounds, at boot -------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        (
            {"fixed_rate": 60.0, "jitter": 60.0},
            "jitter=1m is not shorter than its fixed_rate of 1m",
        ),
        ({"fixed_delay": 10.0, "jitter": 15.0}, "jitter=15s is not shorter than its fixed_delay"),
        (
            {"cron": "*/15 * * * *", "jitter": 900.0},
            "shortest gap between two fires of its cron, 15m",
        ),
        ({"cron": "0,5 3 * * *", "jitter": 600.0}, "its cron, 5m"),
        # The shifted spring fire comes 23h30m after the one the day before.
        (
            {"cron": "30 2 * * *", "zone": "Europe/Paris", "jitter": 23.75 * 3600},
            "its cron, 23h30m",
        ),
        # The repeated hour fires twice, one hour apart, once a year.
        (
            {
                "cron": "30 1 * * *",
                "zone": "America/New_York",
                "dst_fold": "both",
                "jitter": 5400.0,
            },
            "its cron, 1h",
        ),
    ],
)
def test_a_jitter_not_shorter_than_the_period_is_refused(
    fields: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        validate_descriptor(ScheduledDescriptor(target="pkg.mod:f", **fields))
    assert str(raised.value).startswith("pkg.mod:f: ")
    assert fragment in str(raised.value)


@pytest.mark.parametrize("jitter", [0, -5, "0s", "0.5ms", "soon"])
def test_the_decorator_refuses_a_jitter_that_is_no_positive_duration(jitter: object) -> None:
    def report() -> None:
        pass

    report.__module__, report.__qualname__ = "app.tasks", "report"
    with pytest.raises(ConfigurationError, match=r"app\.tasks:report jitter: "):
        scheduled(fixed_rate="1m", jitter=jitter)(report)  # type: ignore[arg-type]


def test_a_jitter_within_bounds_is_kept_in_seconds_and_through_the_manifest() -> None:
    def report() -> None:
        pass

    report.__module__, report.__qualname__ = "app.tasks", "report"
    scheduled(cron="*/5 * * * *", jitter="30s")(report)
    descriptor = report.__firefly_scheduled__  # type: ignore[attr-defined]
    assert descriptor.jitter == 30.0
    _, loaded = decode(json.loads(encode([descriptor], ["app"])))
    assert loaded == (descriptor,)


def test_the_shortest_cron_gap_sees_a_leap_day_cron_as_years_apart() -> None:
    gap = shortest_cron_gap(CronSchedule.parse("0 0 29 2 *", None, source="t"))
    assert gap >= 365 * 86400


# -- lateness counts from instant + offset ------------------------------------------


def runner_at(now: datetime, history: MemoryRunHistory) -> FireRunner:
    return FireRunner(InMemoryLock(), history=history, clock=lambda: now, grace=5.0)


def test_a_fire_within_grace_of_its_offset_runs_though_late_from_its_instant() -> None:
    fire = Fire.at(locked_task(fixed_rate=3600.0, jitter=1800.0), T0)
    while (fire.due - T0).total_seconds() <= 5.0:  # an offset later than grace, by name
        fire = Fire.at(locked_task(fixed_rate=3600.0, jitter=1800.0), T0)
    task = fire.task
    history = MemoryRunHistory()
    result = runner_at(fire.due + timedelta(seconds=4), history).run(fire, lambda: None)
    assert result.verdict is Verdict.SUCCEEDED
    [record] = history.runs(task.target)
    assert record.instant == T0  # named by its instant, not its start


def test_a_fire_past_grace_of_its_offset_is_skipped_with_the_lateness_from_it() -> None:
    task = locked_task(fixed_rate=3600.0, jitter=1800.0)
    fire = Fire.at(task, T0)
    history = MemoryRunHistory()
    result = runner_at(fire.due + timedelta(seconds=6), history).run(fire, lambda: None)
    assert result.verdict is Verdict.TOO_LATE
    [record] = history.runs(task.target)
    assert record.state is RunState.SKIPPED
    assert record.error == "6.000s late, beyond the grace of 5s"


def test_the_claim_lives_until_the_offset_plus_grace_and_skew() -> None:
    task = locked_task(fixed_rate=3600.0, jitter=1800.0)
    fire = Fire.at(task, T0)
    lock = InMemoryLock()
    first = FireRunner(lock, clock=lambda: fire.due, grace=5.0, clock_skew=2.0)
    assert first.run(fire, lambda: None).verdict is Verdict.SUCCEEDED
    # A node waking at the end of its grace, its clock 2 s slow, still finds the claim.
    late = FireRunner(lock, clock=lambda: fire.due + timedelta(seconds=4.9), grace=5.0)
    assert late.run(fire, lambda: None).verdict is Verdict.CLAIMED_ELSEWHERE


# -- never before the offset -------------------------------------------------------


def test_the_runner_handed_a_fire_early_waits_for_its_offset() -> None:
    task = locked_task(fixed_rate=10.0, jitter=2.0)
    instant = datetime.now(UTC)
    fire = Fire.at(task, instant)
    wait = (fire.due - datetime.now(UTC)).total_seconds()
    handed = time.monotonic()
    started: list[float] = []
    result = FireRunner(InMemoryLock(), clock=lambda: datetime.now(UTC)).run(
        fire, lambda: started.append(time.monotonic())
    )
    assert result.verdict is Verdict.SUCCEEDED
    # The body's own monotonic stamp: at least the time left until the offset.
    assert started[0] - handed >= wait - 0.001


def test_the_resident_trigger_wakes_at_each_offset_and_names_the_instant() -> None:
    task = locked_task(fixed_rate=60.0, jitter=45.0)
    trigger = trigger_for(task)
    assert isinstance(trigger, JitteredTrigger)
    now = T0 + timedelta(seconds=1)
    wake_ups, previous = [], None
    for _ in range(5):
        previous = trigger.get_next_fire_time(previous, now)
        assert previous is not None
        wake_ups.append(previous)
    instants = [T0 + k * MINUTE for k in range(1, 6)]
    if T0 + jitter_offset(task.target, T0, 45.0) >= now:  # T0's own fire is still ahead
        instants = [T0, *instants[:-1]]
    assert wake_ups == [at + jitter_offset(task.target, at, 45.0) for at in instants]
    for instant, wake_up in zip(instants, wake_ups, strict=True):
        assert trigger.fire_at_or_before(wake_up) == instant
        assert trigger.fire_at_or_before(wake_up - timedelta(microseconds=1)) < instant


def test_a_task_without_jitter_keeps_its_plain_trigger() -> None:
    assert not isinstance(trigger_for(locked_task(fixed_rate=60.0)), JitteredTrigger)
