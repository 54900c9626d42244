"""Add, remove and list runtime schedules on a control store (what the API and CLI call).

Written once, for asyncio; `runtime_schedules.py` is generated from it by
`tools/async_to_sync.py`. Everything an operator asks is checked here before the
store is written (`control.runtime_tasks`): the target must be a callable the code
allows, the arguments are the `@scheduled` ones, read as the decorator reads them.
Adding the same schedule twice stores one record (the store keys it by name);
adding a name again with other arguments raises `ScheduleConflict`.
"""

# async-to-sync: rename AsyncControlStore ControlStore

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from firefly_scheduling.control.records import RuntimeSchedule, checked_text
from firefly_scheduling.control.runtime_tasks import runtime_descriptor
from firefly_scheduling.control.store_async import AsyncControlStore


async def add_runtime_schedule(
    store: AsyncControlStore,
    name: str,
    target: str,
    *,
    by: str,
    allowed: Collection[str],
    **arguments: Any,
) -> bool:
    """Define schedule `name` running `target` with the `@scheduled` `arguments`.

    `allowed` is what the code lets a runtime schedule name
    (`tasks.discovery.runtime_targets`). True when added, False when the same
    schedule exists already; a `ConfigurationError` names a refused value, and a
    `ScheduleConflict` a name taken with other arguments.
    """
    by = checked_text(by, "who adds a schedule", required=True)
    descriptor = runtime_descriptor(name, target, arguments, allowed=allowed)
    return await store.add_schedule(name, descriptor, by=by)


async def remove_runtime_schedule(
    store: AsyncControlStore, name: str, *, by: str | None = None
) -> bool:
    """Remove schedule `name`; whether it existed. Nodes stop it at their next read.

    `by` (default `<login>@<host>`) goes to the audit trail."""
    return await store.remove_schedule(name, by=by)


async def runtime_schedules(store: AsyncControlStore) -> list[RuntimeSchedule]:
    """Every runtime schedule in the store, by name (including ones nodes refuse)."""
    return await store.schedules()
