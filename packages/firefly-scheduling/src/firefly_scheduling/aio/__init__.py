"""asyncio: the async port, its shared base classes and the in-memory lock, in one import.

* `AsyncDistributedLock`, the port, and its capabilities (`locks.port`);
* `AsyncBaseLock` and `AsyncSessionLock`, which adapters subclass (`locks.base_async`,
  `locks.session_async`); the synchronous `BaseLock` and `SessionLock` are generated from
  them (`tools/async_to_sync.py`), so both flavours follow one text;
* `AsyncInMemoryLock`, `AsyncNoneLock` and `ahold(lock, name, ttl_seconds, *, wait=,
  keep_alive=)`;
* leader election: `async with leadership(lock, name, ttl_seconds) as lead:` and
  `await run_as_leader(lock, name, fn, ttl_seconds)`;
* `resolve_async_lock(settings)`, the configured provider's asyncio lock;
* `AsyncScheduleControl`, to pause, resume, trigger and backfill tasks of a running
  fleet (`control.steering_async`).

An async adapter and the sync adapter of one backend exclude each other on the same
name, so a fleet can mix sync and async nodes.
"""

from __future__ import annotations

from firefly_scheduling.control.steering_async import AsyncScheduleControl
from firefly_scheduling.locks.base_async import AsyncBaseLock
from firefly_scheduling.locks.hold_async import AsyncHold, ahold
from firefly_scheduling.locks.leadership_async import (
    LeadershipTimeout,
    async_leadership,
    async_run_as_leader,
)
from firefly_scheduling.locks.leadership_async import async_leadership as leadership
from firefly_scheduling.locks.leadership_async import async_run_as_leader as run_as_leader
from firefly_scheduling.locks.memory_async import AsyncInMemoryLock
from firefly_scheduling.locks.none import AsyncNoneLock
from firefly_scheduling.locks.port import (
    AsyncClaimingLock,
    AsyncDistributedLock,
    AsyncFencedLock,
    AsyncHoldingLock,
    AsyncRenewableLock,
)
from firefly_scheduling.locks.providers import resolve_async_lock
from firefly_scheduling.locks.session_async import AsyncSessionLock

__all__ = [
    "AsyncBaseLock",
    "AsyncClaimingLock",
    "AsyncDistributedLock",
    "AsyncFencedLock",
    "AsyncHold",
    "AsyncHoldingLock",
    "AsyncInMemoryLock",
    "AsyncNoneLock",
    "AsyncRenewableLock",
    "AsyncScheduleControl",
    "AsyncSessionLock",
    "LeadershipTimeout",
    "ahold",
    "async_leadership",
    "async_run_as_leader",
    "leadership",
    "resolve_async_lock",
    "run_as_leader",
]
