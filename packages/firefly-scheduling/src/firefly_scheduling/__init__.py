"""firefly-scheduling: run a scheduled task on at most one node of a fleet."""

from __future__ import annotations

from firefly_scheduling.errors import (
    ConfigurationError,
    DurationError,
    FireflySchedulingError,
    LockBackendError,
)
from firefly_scheduling.locks import BaseLock, DistributedLock, InMemoryLock, NoneLock, hold
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.settings import Settings

__all__ = [
    "BaseLock",
    "ConfigurationError",
    "DistributedLock",
    "DurationError",
    "FireflySchedulingError",
    "InMemoryLock",
    "LockBackendError",
    "NoneLock",
    "Settings",
    "hold",
    "resolve_lock",
]
