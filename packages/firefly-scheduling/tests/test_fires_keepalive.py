"""FireRunner's keep-alive renews a long body's lease, and reports the body lost when it cannot.

On InMemoryLock + the memory history; a long body really runs past its lease.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from firefly_scheduling import current_fire
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory
from firefly_scheduling.locks import InMemoryLock

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
from firefly_fire_runner_scene import SECOND, T0, Clock, DeadNode, Recorder, runner, task


class RenewalFails(InMemoryLock):
    """A lock whose server stops answering renewals (a partition, a failover)."""

    def _renew(self, name: str, owner: str, ttl_seconds: float) -> bool:
        return False


class TestKeepAlive:
    def test_a_long_body_keeps_its_lease_and_no_other_node_starts(self) -> None:
        descriptor = task(lock_ttl=0.3)
        history = MemoryRunHistory()
        done = threading.Event()
        long_body = Recorder(lambda: time.sleep(0.9))  # three times the lease
        holder = runner(Clock(), history, "holder")

        def hold_long() -> None:
            holder.run(Fire.at(descriptor, T0), long_body)
            done.set()

        thread = threading.Thread(target=hold_long)
        thread.start()
        others = runner(Clock(), history, "other")
        attempts = 0
        while not done.wait(0.05):
            attempts += 1
            instant = T0 + attempts * SECOND
            status = others.run(Fire.at(descriptor, instant), Recorder()).verdict
            assert status is Verdict.OVERLAPPING
        thread.join(timeout=10)
        assert attempts >= 10
        later = Recorder()
        others.run(Fire.at(descriptor, T0 + 100 * SECOND), later)
        [first], [after] = long_body.seen, later.seen
        assert not first.lost
        assert first.token is not None
        assert after.token is not None
        assert after.token > first.token

    def test_a_failed_renewal_is_visible_to_the_body(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        descriptor = task(lock_ttl=0.3)
        observed: list[bool] = []

        def watchful() -> None:
            context = current_fire()
            assert context is not None
            deadline = time.monotonic() + 5
            while not context.lost and time.monotonic() < deadline:
                time.sleep(0.01)
            observed.append(context.lost)

        node = FireRunner(RenewalFails(), clock=Clock(), node="a")
        outcome = node.run(Fire.at(descriptor, T0), watchful)
        assert observed == [True]
        assert outcome.lost
        assert "is lost while the body runs" in caplog.text

    def test_a_lock_lost_during_an_adoption_stops_the_fire_after_it(self) -> None:
        history = MemoryRunHistory()
        descriptor = task(lock_ttl=0.3)
        DeadNode(descriptor, history)

        def until_lost() -> None:
            context = current_fire()
            assert context is not None
            deadline = time.monotonic() + 5
            while not context.lost and time.monotonic() < deadline:
                time.sleep(0.01)

        body = Recorder(until_lost)
        now = T0 + 10 * SECOND
        node = FireRunner(RenewalFails(), history=history, clock=Clock(now), node="a")
        outcome = node.run(Fire.at(descriptor, now), body)
        assert outcome.verdict is Verdict.LOCK_LOST
        assert [c.instant for c in body.seen] == [T0]
        assert outcome.adopted[0].lost
