"""The control store: the state operators change at runtime, kept on a durable server.

Pauses (per task, or of the whole fleet), pending triggers (one extra run each,
taken exactly once across the fleet), backfill requests (a task and a window
`[start, end)`) and schedules defined at runtime (a name and validated `@scheduled`
arguments). `AsyncControlStore` / `ControlStore` is the port, with every rule in
core; each backend's adapter implements six atomic round trips. Resolve the
configured one with `resolve_control_store` (`resolve_async_control_store`).
"""

from __future__ import annotations

from firefly_scheduling.control.records import (
    ALL_TASKS,
    Backfill,
    Change,
    ControlRecordError,
    ControlStoreError,
    Pause,
    RuntimeSchedule,
    ScheduleConflict,
    Trigger,
)
from firefly_scheduling.control.selection import (
    control_store_url,
    resolve_async_control_store,
    resolve_control_store,
)
from firefly_scheduling.control.steering_state import FleetStatus, TaskState
from firefly_scheduling.control.store import ControlStore
from firefly_scheduling.control.store_async import AsyncControlStore

__all__ = [
    "ALL_TASKS",
    "AsyncControlStore",
    "Backfill",
    "Change",
    "ControlRecordError",
    "ControlStore",
    "ControlStoreError",
    "FleetStatus",
    "Pause",
    "RuntimeSchedule",
    "ScheduleConflict",
    "TaskState",
    "Trigger",
    "control_store_url",
    "resolve_async_control_store",
    "resolve_control_store",
]
