"""The fire runner's test scene: a movable clock, unique locked tasks, a recording body,
and what a node killed mid-body leaves behind.

`test_fires_execution`, `test_fires_adoption` and `test_fires_keepalive` run FireRunner
on InMemoryLock and the memory history with these; they put this directory on sys.path.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from firefly_scheduling import current_fire
from firefly_scheduling.fires.claims import claim_name
from firefly_scheduling.fires.context import FireContext
from firefly_scheduling.fires.runner import FireRunner
from firefly_scheduling.history import MemoryRunHistory
from firefly_scheduling.locks import InMemoryLock
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

T0 = datetime(2030, 1, 1, 0, 0, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


class Clock:
    """A wall clock that moves only when told; `offset` makes a skewed node."""

    def __init__(self, now: datetime = T0, offset: float = 0.0) -> None:
        self.now = now
        self.offset = timedelta(seconds=offset)

    def __call__(self) -> datetime:
        return self.now + self.offset


def task(
    *, lock_ttl: float = 30.0, fixed_rate: float | None = 1.0, fixed_delay: float | None = None
) -> ScheduledDescriptor:
    """A locked task with a unique name (the memory lock's table is process-wide)."""
    target = f"tests.jobs_{uuid.uuid4().hex}:report"
    if fixed_delay is not None:
        fixed_rate = None
    return ScheduledDescriptor(
        target=target,
        lock_name=target,
        lock_ttl=lock_ttl,
        fixed_rate=fixed_rate,
        fixed_delay=fixed_delay,
    )


class Recorder:
    """A body that records the fire context it ran in."""

    def __init__(self, work: Callable[[], object] | None = None) -> None:
        self.seen: list[FireContext] = []
        self._work = work
        self._mutex = threading.Lock()

    def __call__(self) -> None:
        context = current_fire()
        assert context is not None
        with self._mutex:
            self.seen.append(context)
        if self._work is not None:
            self._work()


def runner(
    clock: Clock,
    history: MemoryRunHistory | None,
    node: str,
    *,
    grace: float = 60.0,
    keepalive_interval: float | None = None,
) -> FireRunner:
    return FireRunner(
        InMemoryLock(),
        history=history,
        clock=clock,
        node=node,
        grace=grace,
        keepalive_interval=keepalive_interval,
    )


class DeadNode:
    """What a node killed mid-body leaves behind: a claim, a running record, a lapsing lease."""

    def __init__(self, descriptor: ScheduledDescriptor, history: MemoryRunHistory) -> None:
        assert descriptor.lock_name is not None
        lock = InMemoryLock()
        assert lock.try_acquire(claim_name(descriptor.target, descriptor.lock_name, T0), 65)
        token = lock.try_acquire_fenced(descriptor.lock_name, 0.05)
        assert token is not None
        self.token = token
        assert (
            history.start(
                descriptor.target, T0, lock=descriptor.target, node="dead", token=token, at=T0
            )
            == 1
        )
        time.sleep(0.1)  # its lease lapses: nobody renews it
