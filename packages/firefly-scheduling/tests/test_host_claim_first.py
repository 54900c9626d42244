"""The resident host claims a due instant's fires together, before any reaches a worker.

The per-fire CPU target for a node that loses a claim (0.25 ms) was out of
reach while every lost fire first woke a worker thread: the wake-up, APScheduler's run
wrapper and a round trip per thread cost 0.64 ms on Redis (`benchmarks/fire_cost.py`).
`hosts.claim_first` claims in one thread and runs a lost fire's job there. These
tests run two real resident hosts (two nodes) on one shared lock and look at where
each fire's result was reported from, and at the run bodies' own record.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "host_support"))
import firefly_host_unit_tasks as tasks

from firefly_scheduling import ScheduledDescriptor, Settings
from firefly_scheduling.fires.outcome import FireResult, Verdict
from firefly_scheduling.hosts.resident import ResidentHost
from firefly_scheduling.hosts.runtime.boot import build_runtime
from firefly_scheduling.locks.memory import InMemoryLock

MODULE = "firefly_host_unit_tasks"
CLAIMER_THREAD = "firefly-claimer"


class ThreadsSeen:
    """An observer noting each result with the thread that reported it."""

    def __init__(self) -> None:
        self.results: list[tuple[FireResult, str]] = []
        self._mutex = threading.Lock()

    def fire_finished(self, result: FireResult) -> None:
        with self._mutex:
            self.results.append((result, threading.current_thread().name))


def test_lost_fires_stay_in_the_claimer_thread_and_each_fire_runs_once() -> None:
    tasks.reset()
    descriptors = [
        ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=0.2, lock_name=f"batch-{n}")
        for n in range(6)
    ]
    shared = InMemoryLock()  # both nodes claim on one lock, as two processes on one server
    seen = [ThreadsSeen(), ThreadsSeen()]
    hosts = [
        ResidentHost(
            descriptors,
            build_runtime(
                descriptors,
                Settings(lock_provider="memory"),
                host="run",
                lock=shared,
                node=f"node-{n}",
                observers=[seen[n]],
            ),
            grace_period=5.0,
        )
        for n in range(2)
    ]
    for host in hosts:
        host.start()
    try:
        time.sleep(2.0)
    finally:
        for host in hosts:
            assert host.shutdown() == 0
    results = [entry for observer in seen for entry in observer.results]
    lost = [thread for result, thread in results if result.verdict is Verdict.CLAIMED_ELSEWHERE]
    won = [
        (result.fire.target, result.fire.task.lock_name, result.fire.instant, thread)
        for result, thread in results
        if result.verdict is Verdict.SUCCEEDED
    ]
    # Two nodes, six tasks at 0.2 s for 2 s: about 60 fires, each lost by one node.
    assert len(lost) >= 30, Counter(result.verdict for result, _ in results)
    assert set(lost) == {CLAIMER_THREAD}, "a lost fire reached a worker thread"
    assert won, "no fire ran"
    assert all(thread != CLAIMER_THREAD for *_, thread in won), "a body ran in the claimer"
    runs = Counter(fire[:3] for fire in won)
    assert max(runs.values()) == 1, "a fire ran twice"
    assert len(tasks.calls("ping")) == len(won), "the bodies' own record disagrees"
    tasks.reset()


def test_a_fire_admitted_before_shutdown_is_waited_for() -> None:
    """The claimer admits a fire before claiming it: a shutdown meanwhile must wait."""
    descriptors = [ScheduledDescriptor(target=f"{MODULE}:ping", fixed_rate=1.0, lock_name="a")]
    runtime = build_runtime(descriptors, Settings(lock_provider="memory"), host="run")
    ticket = runtime.admit("the fire")
    assert ticket is not None
    runtime.stop_accepting()
    assert runtime.admit("a later fire") is None
    assert runtime.in_flight() == ["the fire"]
    assert not runtime.wait_idle(0.05), "the shutdown did not wait for an admitted fire"
    with runtime.tracking("the fire", admitted=ticket) as accepted:
        assert accepted, "an admitted fire was refused at its run"
    assert runtime.wait_idle(0.05)
    runtime.close()
