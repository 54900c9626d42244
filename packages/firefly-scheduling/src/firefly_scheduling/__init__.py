"""firefly-scheduling: run a scheduled task on at most one node of a fleet."""

from __future__ import annotations

from firefly_scheduling.control.steering import ScheduleControl
from firefly_scheduling.errors import (
    ConfigurationError,
    DurationError,
    FireflySchedulingError,
    LockBackendError,
)
from firefly_scheduling.fires.atomic import AtomicOutcomeError, StaleFireError
from firefly_scheduling.fires.context import FireContext, current_fire
from firefly_scheduling.hosts.library import register
from firefly_scheduling.initial_delay import InitialDelayGate
from firefly_scheduling.locks import (
    BaseLock,
    DistributedLock,
    InMemoryLock,
    NoneLock,
    hold,
    leadership,
    run_as_leader,
)
from firefly_scheduling.locks.providers import resolve_lock
from firefly_scheduling.schedule.cadence import Cadence
from firefly_scheduling.schedule.durations import parse_duration
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.decorator import scheduled
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.manifest import ScheduledManifest
from firefly_scheduling.tasks.scanner import scan
from firefly_scheduling.tasks.schedulable import schedulable
from firefly_scheduling.version import __version__

__all__ = [
    "AtomicOutcomeError",
    "BaseLock",
    "Cadence",
    "ConfigurationError",
    "DistributedLock",
    "DurationError",
    "FireContext",
    "FireflySchedulingError",
    "InMemoryLock",
    "InitialDelayGate",
    "LockBackendError",
    "NoneLock",
    "ScheduleControl",
    "ScheduledDescriptor",
    "ScheduledManifest",
    "Settings",
    "StaleFireError",
    "__version__",
    "current_fire",
    "hold",
    "leadership",
    "parse_duration",
    "register",
    "resolve_lock",
    "run_as_leader",
    "scan",
    "schedulable",
    "scheduled",
]
