"""`AsyncScheduleControl`: steer a running fleet (pause, resume, trigger, backfill, schedules).

Written once, for asyncio; `ScheduleControl` in `steering.py` is generated from it by
`tools/async_to_sync.py`. It resolves the control store from the same settings as the
lock (`control.selection`), so `ScheduleControl()` in a shell or a web view steers the
fleet a host of the same configuration runs. A task is named by its target, as
`runs --task` names it; `pause`, `resume` and `status` also take a runtime schedule's
name (`add_schedule`), the name its fires are recorded under.

Every change names who made it (`by`, by default `<login>@<host>`), is stamped
with the store's clock and is kept in the store's audit trail (`Change`), so
`status` says who paused, resumed or triggered what, when and why. A pause
holds from the moment `pause` returns: each node reads the pauses after it wins a
fire's claim, just before the run starts (`fires.pausing`).
"""

# async-to-sync: rename AsyncScheduleControl ScheduleControl
# async-to-sync: rename resolve_async_control_store resolve_control_store
# async-to-sync: rename AsyncControlStore ControlStore

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from types import TracebackType
from typing import Unpack

from firefly_scheduling.control.records import Backfill, Change, Pause, Trigger, checked_task
from firefly_scheduling.control.runtime_schedules_async import (
    add_runtime_schedule,
    remove_runtime_schedule,
)
from firefly_scheduling.control.selection import resolve_async_control_store
from firefly_scheduling.control.steering_state import (
    FleetStatus,
    fleet_status,
    note_text,
    operator,
)
from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.control.triggers_async import backfill as request_backfill
from firefly_scheduling.control.triggers_async import trigger as request_trigger
from firefly_scheduling.settings import Settings
from firefly_scheduling.tasks.decorator import ScheduleArguments
from firefly_scheduling.tasks.discovery import runtime_targets


class AsyncScheduleControl:
    """Pause, resume, trigger and backfill tasks, and add schedules, on the control store.

    `AsyncScheduleControl()` reads the settings from the environment;
    `AsyncScheduleControl(settings)` takes them; `store=` takes a store already built
    (closed by its owner). A configuration without a durable control store is
    refused here with a `ConfigurationError` naming the setting to set.
    """

    def __init__(
        self, settings: Settings | None = None, *, store: AsyncControlStore | None = None
    ) -> None:
        self._settings = Settings.from_env() if settings is None else settings
        self._owns_store = store is None
        self._store = resolve_async_control_store(self._settings) if store is None else store

    @property
    def store(self) -> AsyncControlStore:
        return self._store

    # -- pause --------------------------------------------------------------------------

    async def pause(self, task: str, note: str | None = None, by: str | None = None) -> Pause:
        """Pause `task`: once this returns, no fire of it later than now starts anywhere."""
        return await self._store.pause(
            checked_task(task, schedule_names=True), by=operator(by), note=note_text(note)
        )

    async def pause_all(self, note: str | None = None, by: str | None = None) -> Pause:
        """Pause every task of the fleet; `resume_all` lifts it (task pauses stay)."""
        return await self._store.pause_all(by=operator(by), note=note_text(note))

    async def resume(self, task: str, by: str | None = None) -> bool:
        """Resume `task` from now; whether it had a pause of its own.

        The fires missed while it was paused stay recorded as skipped ("paused") and
        are not caught up. A fleet-wide pause still holds it: `resume_all` lifts that.
        """
        return await self._store.resume(checked_task(task, schedule_names=True), by=operator(by))

    async def resume_all(self, by: str | None = None) -> bool:
        """Lift the fleet-wide pause; whether there was one."""
        return await self._store.resume_all(by=operator(by))

    async def status(
        self, task: str | None = None, *, tasks: Iterable[str] = (), changes: int = 0
    ) -> FleetStatus:
        """The fleet-wide pause and each paused task's state (one read of the store).

        `task` narrows the answer to that task; `tasks` adds these (paused or not),
        such as every task a manifest lists. `changes` > 0 also reads that many of
        the newest changes (of `task`, or all) from the audit trail (a second read),
        and lists the tasks they changed.
        """
        names = None if task is None else [checked_task(task, schedule_names=True)]
        extra = [checked_task(name, schedule_names=True) for name in tasks]
        pauses = await self._store.pauses()
        recent: list[Change] = []
        if changes > 0:
            recent = await self._store.changes(None if names is None else names[0], limit=changes)
        return fleet_status(pauses, names, extra, recent)

    # -- runs on request ------------------------------------------------------------------

    async def trigger(self, task: str, by: str | None = None) -> Trigger:
        """Ask for one extra run of `task` now (it runs even while the task is paused)."""
        return await request_trigger(self._store, checked_task(task), by=operator(by))

    async def backfill(
        self, task: str, start: datetime, end: datetime, by: str | None = None
    ) -> Backfill:
        """Ask for the schedule's fires of `task` in `[start, end)` (aware datetimes)
        that have no successful run; refused without a run history."""
        return await request_backfill(
            self._store, checked_task(task), start, end, by=operator(by), settings=self._settings
        )

    # -- runtime schedules ------------------------------------------------------------------

    async def add_schedule(
        self,
        name: str,
        target: str,
        *,
        by: str | None = None,
        allowed: Collection[str] | None = None,
        **arguments: Unpack[ScheduleArguments],
    ) -> bool:
        """Define schedule `name` running `target` with `@scheduled`'s `arguments`.

        `target` must be a callable the code allows (`allowed`, by default the targets
        `tasks.discovery.runtime_targets` finds with these settings); the arguments are
        read as the decorator reads them, and the lock is named after `name`. True when
        added, False when the same schedule exists; another schedule of that name
        raises `ScheduleConflict`. Every node running this code picks it up.
        """
        if allowed is None:
            allowed = runtime_targets(self._settings)
        return await add_runtime_schedule(
            self._store, name, target, by=operator(by), allowed=allowed, **arguments
        )

    async def remove_schedule(self, name: str, by: str | None = None) -> bool:
        """Remove the runtime schedule `name`; whether it existed."""
        return await remove_runtime_schedule(self._store, name, by=operator(by))

    # -- lifetime ---------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the store this built (one passed as `store=` is its owner's)."""
        if self._owns_store:
            await self._store.aclose()

    async def __aenter__(self) -> AsyncScheduleControl:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store!r})"
