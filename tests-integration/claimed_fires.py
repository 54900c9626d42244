"""Tasks and a clock for the tests of fires claimed in a batch ahead of their bodies.

Each call of `tasks` names tasks no earlier run used, so their locks and run records
never meet another test's on the shared servers. `Clock` is the wall clock a test
moves: the runner reads it for its grace and for the records it writes.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from firefly_scheduling.tasks.descriptor import ScheduledDescriptor


class Clock:
    """A wall clock the test moves, starting a second from now (whole seconds)."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)

    def __call__(self) -> datetime:
        return self.now


def tasks(count: int) -> list[ScheduledDescriptor]:
    """`count` fixed-rate tasks of new names, each locked by its own name."""
    prefix = f"tests.claimed_{uuid.uuid4().hex}"
    return [
        ScheduledDescriptor(target=f"{prefix}:job{i}", lock_name=f"{prefix}:job{i}", fixed_rate=1.0)
        for i in range(count)
    ]


def one_task() -> tuple[ScheduledDescriptor, str, str]:
    """A new task, its target and its lock name."""
    [descriptor] = tasks(1)
    return descriptor, descriptor.target, descriptor.lock_name or ""
