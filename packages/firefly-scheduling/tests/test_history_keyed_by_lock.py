"""the run history is keyed by (lock name, target), not by target alone.

Two deployments of one application (say staging and production) that share a
history database run the same targets under different lock names. Keyed by target
alone, each adopted the other's died fires and ran them again.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory, RunState
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def _deployment(target: str, name: str) -> ScheduledDescriptor:
    return ScheduledDescriptor(
        target=target, lock_name=f"{name}-{target}", lock_ttl=30.0, fixed_rate=1.0
    )


def _died_run(descriptor: ScheduledDescriptor, history: MemoryRunHistory) -> None:
    """What a node killed mid-body leaves: a claim, a `running` record, a lapsing lease."""
    assert descriptor.lock_name is not None
    lock = InMemoryLock()
    assert lock.try_acquire(claim_name(descriptor.target, descriptor.lock_name, T0), 65)
    token = lock.try_acquire_fenced(descriptor.lock_name, 0.05)
    assert token is not None
    started = history.start(
        descriptor.target, T0, lock=descriptor.lock_name, node="dead", token=token, at=T0
    )
    assert started == 1
    time.sleep(0.1)  # its lease lapses


def test_a_deployment_never_adopts_another_deployments_died_fire() -> None:
    history = MemoryRunHistory()
    target = f"tests.jobs_{uuid.uuid4().hex}:report"
    staging, production = _deployment(target, "staging"), _deployment(target, "production")
    _died_run(staging, history)
    ran: list[datetime] = []
    now = T0 + 31 * SECOND
    node = FireRunner(InMemoryLock(), history=history, clock=lambda: now, node="prod-1")

    outcome = node.run(Fire.at(production, now), lambda: ran.append(now))

    assert outcome.verdict is Verdict.SUCCEEDED
    assert outcome.adopted == (), "production adopted a fire of staging"
    assert ran == [now]
    states = {(r.lock, r.instant): r.state for r in history.runs(target, limit=10)}
    assert states == {
        (staging.lock_name, T0): RunState.RUNNING,  # left for staging's own nodes to adopt
        (production.lock_name, now): RunState.SUCCEEDED,
    }


def test_the_same_fire_of_two_deployments_is_recorded_twice() -> None:
    history = MemoryRunHistory()
    target = f"tests.jobs_{uuid.uuid4().hex}:report"
    ran: list[str] = []
    for name in ("staging", "production"):
        descriptor = _deployment(target, name)
        node = FireRunner(InMemoryLock(), history=history, clock=lambda: T0, node=name)
        outcome = node.run(Fire.at(descriptor, T0), lambda name=name: ran.append(name))  # type: ignore[misc]
        assert outcome.verdict is Verdict.SUCCEEDED, name
    assert sorted(ran) == ["production", "staging"]
    assert len(history.runs(target)) == 2
