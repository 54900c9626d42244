"""The lock port, the shared base class, the built-in backends, and plain-lock helpers:
`hold` (try, wait, keep alive) and leader election (`leadership`, `run_as_leader`)."""

from __future__ import annotations

from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.locks.hold import Hold, hold
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.leadership import leadership, run_as_leader
from firefly_scheduling.locks.leadership_async import LeadershipTimeout
from firefly_scheduling.locks.memory import InMemoryLock
from firefly_scheduling.locks.none import NoneLock
from firefly_scheduling.locks.port import (
    ClaimingLock,
    DistributedLock,
    FencedLock,
    HoldingLock,
    LockCapabilities,
    RenewableLock,
    capabilities_of,
)

__all__ = [
    "BaseLock",
    "ClaimingLock",
    "DistributedLock",
    "FencedLock",
    "Hold",
    "Holding",
    "HoldingLock",
    "InMemoryLock",
    "LeadershipTimeout",
    "LockCapabilities",
    "NoneLock",
    "RenewableLock",
    "capabilities_of",
    "hold",
    "leadership",
    "run_as_leader",
]
