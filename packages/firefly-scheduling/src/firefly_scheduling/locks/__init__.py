"""The lock port, the shared base class and the built-in backends."""

from __future__ import annotations

from firefly_scheduling.locks.base import BaseLock
from firefly_scheduling.locks.hold import hold
from firefly_scheduling.locks.holding import Holding
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
    "Holding",
    "HoldingLock",
    "InMemoryLock",
    "LockCapabilities",
    "NoneLock",
    "RenewableLock",
    "capabilities_of",
    "hold",
]
