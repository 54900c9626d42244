"""A fire the resident host passes over is recorded as skipped, never silently dropped.

Found by `benchmarks/chaos.py` ("every fire in the window either ran or is
recorded as skipped, with a reason"). APScheduler runs a recurring job once for
several due times (`coalesce=True`) and drops a due time while the previous run of
the job still goes (`max_instances=1`). When that happened on every node at once (a
loaded machine, a 100 ms rate) the fires in between were neither run nor recorded.
The job now records each scheduled instant it passed over since the last one it
named as skipped; a node that did run it has its record already, and a later start
replaces a skip, so the record is harmless where someone else ran the fire.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.history.port import RunState
from firefly_scheduling.hosts.apscheduler.jobs import (
    MAX_PASSED_OVER_RECORDED,
    RecurringFire,
    trigger_for,
)
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.hosts.runtime.execute import execute_fire

MODULE = "firefly_host_unit_tasks"
START = datetime(2026, 3, 4, 12, 0, 0, tzinfo=UTC)


def test_instants_between_two_runs_of_the_job_are_recorded_as_skipped() -> None:
    tasks.reset()
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:ping", fixed_rate=1.0, lock_name="passed-over", lock_ttl=30.0
    )
    runtime = build_runtime(
        [descriptor],
        Settings(lock_provider="memory", history_url="memory://"),
        host="run",
        node="unit",
    )
    now = START
    runtime.now = lambda: now
    job = RecurringFire(descriptor, trigger_for(descriptor), runtime)
    try:
        job()
        now = START + timedelta(seconds=3.2)  # the 1 s and 2 s fires came while it was busy
        job()
        history = runtime.fire_runner.get().history
        assert history is not None
        records = {r.instant: r for r in history.runs(descriptor.target, limit=10)}
        assert records[START].state is RunState.SUCCEEDED
        assert records[START + timedelta(seconds=3)].state is RunState.SUCCEEDED
        for missed in (START + timedelta(seconds=1), START + timedelta(seconds=2)):
            assert records[missed].state is RunState.SKIPPED, records
            assert "passed over" in (records[missed].error or "")
        assert len(tasks.calls("ping")) == 2
    finally:
        runtime.close()
        tasks.reset()


def test_a_fire_another_node_ran_keeps_its_record() -> None:
    tasks.reset()
    descriptor = ScheduledDescriptor(
        target=f"{MODULE}:ping", fixed_rate=1.0, lock_name="passed-over-2", lock_ttl=30.0
    )
    settings = Settings(lock_provider="memory", history_url="memory://")
    runtime = build_runtime([descriptor], settings, host="run", node="unit")
    now = START
    runtime.now = lambda: now
    job = RecurringFire(descriptor, trigger_for(descriptor), runtime)
    try:
        job()
        history = runtime.fire_runner.get().history
        assert history is not None
        ran_elsewhere = START + timedelta(seconds=1)
        lock = "passed-over-2"
        assert history.start(
            descriptor.target, ran_elsewhere, lock=lock, node="other", token=None, at=now
        )
        assert history.finish(
            descriptor.target,
            ran_elsewhere,
            lock=lock,
            token=None,
            state=RunState.SUCCEEDED,
            error=None,
            at=now,
        )
        now = START + timedelta(seconds=2.5)
        job()
        records = {r.instant: r for r in history.runs(descriptor.target, limit=10)}
        assert records[ran_elsewhere].state is RunState.SUCCEEDED
        assert records[ran_elsewhere].node == "other"
    finally:
        runtime.close()
        tasks.reset()


def _ping(lock: str) -> ScheduledDescriptor:
    return ScheduledDescriptor(
        target=f"{MODULE}:ping", fixed_rate=1.0, lock_name=lock, lock_ttl=30.0
    )


def test_a_node_starting_records_what_nobody_ran_since_the_last_record() -> None:
    """The whole fleet was down or stalled: the first node back names those fires.

    Found by the chaos checker's long run: a node SIGKILLed and restarted while every
    other node was stopped forgot the instant it had last named, so the fires of the
    gap were neither run nor recorded by anyone.
    """
    tasks.reset()
    descriptor = _ping("passed-over-restart")
    settings = Settings(lock_provider="memory", history_url="memory://")
    runtime = build_runtime([descriptor], settings, host="run", node="unit")
    now = START
    runtime.now = lambda: now
    try:
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        now = START + timedelta(seconds=3.2)
        restarted = RecurringFire(descriptor, trigger_for(descriptor), runtime)
        restarted()
        history = runtime.fire_runner.get().history
        assert history is not None
        records = {r.instant: r for r in history.runs(descriptor.target, limit=10)}
        assert records[START + timedelta(seconds=3)].state is RunState.SUCCEEDED
        for missed in (START + timedelta(seconds=1), START + timedelta(seconds=2)):
            assert records[missed].state is RunState.SKIPPED, records
            assert "no node ran it" in (records[missed].error or ""), records[missed]
        assert len(tasks.calls("ping")) == 2
    finally:
        runtime.close()
        tasks.reset()


def test_a_node_starting_records_a_gap_before_the_newest_record() -> None:
    """Fires nobody ran are recorded even when a later fire was recorded since.

    Found by the chaos checker (seed 120402): the resident nodes were all stalled or
    restarting, and only the `tick` host ran, at its ticks. Its records were newer
    than the gap, so the first resident node back, which named passed-over fires
    from the task's newest record only, left the fires of the gap unrecorded.
    """
    tasks.reset()
    descriptor = _ping("passed-over-gap")
    settings = Settings(lock_provider="memory", history_url="memory://")
    runtime = build_runtime([descriptor], settings, host="run", node="unit")
    now = START
    runtime.now = lambda: now
    try:
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        # The fleet's resident nodes are gone; a tick host runs the 4 s fire only.
        now = START + timedelta(seconds=4)
        execute_fire(Fire(descriptor, now), runtime)
        now = START + timedelta(seconds=6.2)
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        history = runtime.fire_runner.get().history
        assert history is not None
        records = {r.instant: r for r in history.runs(descriptor.target, limit=20)}
        ran = [START, START + timedelta(seconds=4), START + timedelta(seconds=6)]
        for instant in ran:
            assert records[instant].state is RunState.SUCCEEDED, records
        for seconds in (1, 2, 3, 5):
            missed = START + timedelta(seconds=seconds)
            assert missed in records, f"the {seconds} s fire is unrecorded"
            assert records[missed].state is RunState.SKIPPED, records[missed]
            assert "no node ran it" in (records[missed].error or ""), records[missed]
        assert len(records) == 7
        assert len(tasks.calls("ping")) == 3
    finally:
        runtime.close()
        tasks.reset()


def test_a_long_outage_records_its_newest_fires_only() -> None:
    tasks.reset()
    descriptor = _ping("passed-over-outage")
    settings = Settings(lock_provider="memory", history_url="memory://")
    runtime = build_runtime([descriptor], settings, host="run", node="unit")
    now = START - timedelta(days=1)
    runtime.now = lambda: now
    try:
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        now = START
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        history = runtime.fire_runner.get().history
        assert history is not None
        skipped = sorted(
            r.instant
            for r in history.runs(descriptor.target, limit=5000)
            if r.state is RunState.SKIPPED
        )
        assert len(skipped) == MAX_PASSED_OVER_RECORDED
        assert skipped[-1] == START - timedelta(seconds=1)
        assert skipped[0] == START - timedelta(seconds=MAX_PASSED_OVER_RECORDED)
    finally:
        runtime.close()
        tasks.reset()


def test_a_first_deployment_records_nothing_before_its_first_fire() -> None:
    tasks.reset()
    descriptor = _ping("passed-over-first")
    settings = Settings(lock_provider="memory", history_url="memory://")
    runtime = build_runtime([descriptor], settings, host="run", node="unit")
    runtime.now = lambda: START
    try:
        RecurringFire(descriptor, trigger_for(descriptor), runtime)()
        history = runtime.fire_runner.get().history
        assert history is not None
        assert [(r.instant, r.state) for r in history.runs(descriptor.target)] == [
            (START, RunState.SUCCEEDED)
        ]
    finally:
        runtime.close()
        tasks.reset()
