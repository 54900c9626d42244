"""The lock port, the shared base class and the built-in backends."""

from __future__ import annotations

from firefly_scheduling.locks.base import BaseLock, Lease
from firefly_scheduling.locks.hold import hold
from firefly_scheduling.locks.memory import InMemoryLock
from firefly_scheduling.locks.none import NoneLock
from firefly_scheduling.locks.port import DistributedLock

__all__ = ["BaseLock", "DistributedLock", "InMemoryLock", "Lease", "NoneLock", "hold"]
