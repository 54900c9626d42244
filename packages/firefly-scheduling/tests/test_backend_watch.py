"""`BackendWatch`: a backend lost after boot is one ERROR, a reminder a minute, and its return.

The processes' side (a real Redis behind a proxy that drops everything) is in
tests-integration/test_boot_checks_servers.py; this pins the rules with a fake clock.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from firefly_scheduling.fires.outcome import Fire, FireResult, Verdict
from firefly_scheduling.hosts.observation.backend_watch import BackendWatch
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

LOCKED = ScheduledDescriptor(
    target="app.tasks:beat", fixed_rate=1.0, lock_name="beat", lock_ttl=30.0
)
UNLOCKED = ScheduledDescriptor(target="app.tasks:free", fixed_rate=1.0)
INSTANT = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def result(verdict: Verdict, descriptor: ScheduledDescriptor = LOCKED) -> FireResult:
    error = "ConnectionError: refused" if verdict is Verdict.BACKEND_ERROR else None
    return FireResult(Fire(descriptor, INSTANT), "n", verdict, error=error)


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(record.levelno, record.getMessage()) for record in caplog.records]


def test_an_outage_is_one_error_a_reminder_a_minute_and_one_line_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    watch = BackendWatch(clock=clock)
    with caplog.at_level(logging.INFO, logger="firefly_scheduling.hosts"):
        watch.fire_finished(result(Verdict.SUCCEEDED))
        for second in range(0, 150):  # a fire a second, the backend down for 150 s
            clock.now = 10.0 + second
            watch.fire_finished(result(Verdict.BACKEND_ERROR))
        assert watch.down_since == 10.0
        assert watch.last_error == "ConnectionError: refused"
        clock.now = 200.0
        watch.fire_finished(result(Verdict.CLAIMED_ELSEWHERE))
    logged = lines(caplog)
    assert [level for level, _ in logged] == [logging.ERROR] * 3 + [logging.WARNING]
    assert "stopped answering" in logged[0][1]
    assert "not answered for 60 s: 61 fire(s) skipped" in logged[1][1]
    assert "not answered for 120 s: 121 fire(s) skipped" in logged[2][1]
    assert "answers again after 190 s; 150 fire(s) skipped" in logged[3][1]
    assert watch.down_since is None


def test_unlocked_fires_say_nothing_about_the_backend(caplog: pytest.LogCaptureFixture) -> None:
    watch = BackendWatch(clock=Clock())
    watch.fire_finished(result(Verdict.BACKEND_ERROR))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="firefly_scheduling.hosts"):
        watch.fire_finished(result(Verdict.SUCCEEDED, UNLOCKED))
        watch.fire_finished(result(Verdict.TOO_LATE))
    assert lines(caplog) == []
    assert watch.down_since is not None


def test_a_timed_out_locked_fire_proves_the_backend_answered() -> None:
    watch = BackendWatch(clock=Clock())
    watch.fire_finished(result(Verdict.BACKEND_ERROR))
    assert watch.down_since is not None
    watch.fire_finished(result(Verdict.TIMED_OUT))  # it took the task lock to run
    assert watch.down_since is None
