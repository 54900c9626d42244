"""`AsyncControlStore`: the state operators change at runtime, on a durable server.

Written once, for asyncio; the synchronous `ControlStore` in `store.py` is generated
from it by `tools/async_to_sync.py`. Both keep the same records (`records`) under the
same keys, so sync and async nodes of one fleet read each other's writes.

The rules of every operation live here; an adapter implements six round trips on
one namespace per record kind (`_put`, `_add`, `_get`, `_delete`, `_values`,
`_now`), each atomic on its server, and nothing else:

* a pause is `_put` (the last pause of a task wins), a resume `_delete`, after a
  `_put` of the stretch it lifts (kept, one per task, for fires due in it);
* a trigger is `_add` under a fresh random key; `take_trigger` reads the task's
  triggers, oldest first, and `_delete`s them in turn until one delete removes a
  record: the server answers "removed" to exactly one of any number of racing
  takers, so each trigger is taken once across the fleet. A host does not take its
  triggers so (a reply lost, or a stop, between the take and the run would lose
  one): it runs each pending trigger's fire, whose claim makes it run once, and
  `remove_trigger`s it after (`hosts.runtime.steering`);
* a backfill and a runtime schedule are `_add` under a digest of their identity,
  so asking twice, from any node, stores one record;
* every operator change (pause, resume, trigger, backfill, schedule added or
  removed) then `_add`s a `Change` under a fresh random key: the audit trail of
  who, when and what (`changes`). The change is written after its effect, so a
  call that raises may have taken effect without its trail entry, never the
  reverse; asking again (each call is idempotent) records it. The trail keeps the
  newest `changes_kept` changes (`CHANGES_KEPT` by default): each change recorded
  deletes the older ones, so it never grows past that.

Every change (those of the audit trail, and a backfill cancelled) then moves the
store's change mark (`change_mark`), one record of its own kind: a host polls that
one record, and reads the others only once it moved.

Nothing is cached: every read is a round trip, so a pause written by one node is
seen by the next read of any other. Times (`since`, `requested_at`) come from the
store's clock (`_now`): the server's where it has one, this host's otherwise.
"""

# async-to-sync: rename AsyncControlStore ControlStore
# async-to-sync: rename AsyncRecordStore RecordStore

from __future__ import annotations

import dataclasses
import logging
import secrets
from datetime import datetime
from functools import partial

from firefly_scheduling.control.record_store_async import AsyncRecordStore
from firefly_scheduling.control.records import (
    ALL_TASKS,
    Backfill,
    Change,
    ChangeKind,
    ControlStoreError,
    Pause,
    PauseState,
    RuntimeSchedule,
    ScheduleConflict,
    Trigger,
    checked_schedule,
    checked_task,
    checked_text,
    checked_window,
    decode_backfill,
    decode_change,
    decode_pause,
    decode_schedule,
    decode_trigger,
    descriptor_fields,
    encode,
    record_key,
)
from firefly_scheduling.control.steering_state import operator
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

#: The key of the change mark (`change_mark`), the one record of its kind.
CHANGE_MARK = "mark"
#: The second part of the key of a task's last lifted pause (`resume`).
LIFTED = "lifted"
#: How many changes the audit trail keeps by default (`AsyncControlStore.changes_kept`).
CHANGES_KEPT = 1000

logger = logging.getLogger("firefly_scheduling.control")


class AsyncControlStore(AsyncRecordStore):
    """Pauses, triggers, backfills and runtime schedules; subclasses supply the I/O
    (`AsyncRecordStore`'s round trips)."""

    #: How many changes the audit trail keeps: each change recorded deletes the older.
    changes_kept: int = CHANGES_KEPT

    # -- pause ------------------------------------------------------------------------

    async def pause(self, task: str, *, by: str, note: str = "") -> Pause:
        """Pause `task` (or `ALL_TASKS`); pausing again replaces who, when and the note."""
        task = checked_task(task, allow_all=True, schedule_names=True)
        pause = Pause(
            task=task,
            by=checked_text(by, "who pauses", required=True),
            since=await self.now(),
            note=checked_text(note, "a pause's note", required=False),
        )
        await self._call(
            "pausing", task, partial(self._put, "pause", record_key(task), encode(pause))
        )
        await self._record("pause", task, pause.by, pause.since, pause.note)
        return pause

    async def pause_all(self, *, by: str, note: str = "") -> Pause:
        """Pause every task of the fleet; `resume_all` lifts it (task pauses stay)."""
        return await self.pause(ALL_TASKS, by=by, note=note)

    async def resume(self, task: str, *, by: str | None = None) -> bool:
        """Lift `task`'s own pause (or `ALL_TASKS`'); whether there was one.

        Resume is from now: the lifted stretch is kept (`pause_state().lifted`, one
        record per task, replaced by the next resume) before the pause is removed, so a
        fire due while paused whose start comes after the resume is still skipped.
        `by` (default `<login>@<host>`) is recorded in the audit trail, lifted or not.
        """
        task = checked_task(task, allow_all=True, schedule_names=True)
        by = operator(by)
        at = await self.now()
        key = record_key(task)
        held = await self._call("resuming", task, partial(self._get, "pause", key))
        if held is not None:
            stretch = dataclasses.replace(decode_pause(held), until=at)
            await self._call(
                "resuming",
                task,
                partial(self._put, "pause", record_key(task, LIFTED), encode(stretch)),
            )
        lifted = await self._call("resuming", task, partial(self._delete, "pause", key))
        await self._record("resume", task, by, at, "lifted" if lifted else "was not paused")
        return lifted

    async def resume_all(self, *, by: str | None = None) -> bool:
        """Lift the fleet-wide pause; whether there was one."""
        return await self.resume(ALL_TASKS, by=by)

    async def pause_of(self, task: str) -> Pause | None:
        """The pause that holds `task` now: the fleet-wide one first, else its own, else None."""
        task = checked_task(task, schedule_names=True)
        for name in (ALL_TASKS, task):
            text = await self._call(
                "reading the pause of", name, partial(self._get, "pause", record_key(name))
            )
            if text is not None:
                return decode_pause(text)
        return None

    async def pauses(self) -> list[Pause]:
        """Every pause in force, the fleet-wide one first, then by task."""
        return (await self.pause_state()).in_force

    async def pause_state(self) -> PauseState:
        """The pauses in force and each task's last lifted stretch, in one read; each
        list the fleet-wide one first, then by task."""
        texts = await self._call("listing", "pauses", partial(self._values, "pause"))
        found = sorted(
            (decode_pause(text) for text in texts),
            key=lambda pause: (not pause.all_tasks, pause.task),
        )
        return PauseState(
            in_force=[pause for pause in found if pause.until is None],
            lifted=[pause for pause in found if pause.until is not None],
        )

    # -- triggers ---------------------------------------------------------------------

    async def request_trigger(self, task: str, *, by: str) -> Trigger:
        """Ask for one extra run of `task`, now; it stays pending until a node takes it."""
        trigger = Trigger(
            task=checked_task(task),
            by=checked_text(by, "who triggers", required=True),
            requested_at=await self.now(),
            id=secrets.token_hex(16),
        )
        key = record_key(trigger.id)
        added = await self._call(
            "adding a trigger of", task, partial(self._add, "trigger", key, encode(trigger))
        )
        if not added:  # pragma: no cover - 128 random bits never collide
            raise ControlStoreError(f"trigger id {trigger.id} already exists in {self._target}")
        await self._record("trigger", trigger.task, trigger.by, trigger.requested_at, trigger.id)
        return trigger

    async def take_trigger(self, task: str) -> Trigger | None:
        """Take the oldest pending trigger of `task`, or None: each is taken exactly once.

        Racing takers each try to remove the oldest first; the server says "removed"
        to one of them, and the others move on to the next trigger or return None.
        """
        for trigger in await self.triggers(task):
            key = record_key(trigger.id)
            if await self._call("taking a trigger of", task, partial(self._delete, "trigger", key)):
                return trigger
        return None

    async def remove_trigger(self, trigger: Trigger) -> bool:
        """Remove `trigger` once its fire ran, or was recorded with why it did not;
        whether it was still stored."""
        return await self._call(
            "removing a trigger of",
            trigger.task,
            partial(self._delete, "trigger", record_key(trigger.id)),
        )

    async def triggers(self, task: str | None = None) -> list[Trigger]:
        """The pending triggers (of `task`, or all), oldest first."""
        wanted = None if task is None else checked_task(task)
        texts = await self._call("listing", "triggers", partial(self._values, "trigger"))
        found = [decode_trigger(text) for text in texts]
        return sorted(
            (trigger for trigger in found if wanted is None or trigger.task == wanted),
            key=lambda trigger: (trigger.requested_at, trigger.id),
        )

    # -- backfills --------------------------------------------------------------------

    async def request_backfill(
        self, task: str, start: datetime, end: datetime, *, by: str
    ) -> Backfill:
        """Ask for the fires of `task` in `[start, end)`; the same window twice is one request.

        Returns the stored request: the first asker's, when the window was asked before.
        """
        task = checked_task(task)
        start_utc, end_utc = checked_window(start, end)
        backfill = Backfill(
            task=task,
            start=start_utc,
            end=end_utc,
            by=checked_text(by, "who backfills", required=True),
            requested_at=await self.now(),
        )
        added = await self._call(
            "adding a backfill of",
            task,
            partial(self._add, "backfill", backfill.key, encode(backfill)),
        )
        window = f"[{start_utc.isoformat()}, {end_utc.isoformat()})"
        await self._record(
            "backfill",
            task,
            backfill.by,
            backfill.requested_at,
            window if added else f"{window}, asked before",
        )
        if added:
            return backfill
        text = await self._call(
            "reading a backfill of", task, partial(self._get, "backfill", backfill.key)
        )
        return backfill if text is None else decode_backfill(text)

    async def backfills(self, task: str | None = None) -> list[Backfill]:
        """The stored backfill requests (of `task`, or all), by task then window."""
        wanted = None if task is None else checked_task(task)
        texts = await self._call("listing", "backfills", partial(self._values, "backfill"))
        found = [decode_backfill(text) for text in texts]
        return sorted(
            (backfill for backfill in found if wanted is None or backfill.task == wanted),
            key=lambda backfill: (backfill.task, backfill.start, backfill.end),
        )

    async def cancel_backfill(self, task: str, start: datetime, end: datetime) -> bool:
        """Forget the request for `[start, end)` of `task`; whether there was one."""
        task = checked_task(task)
        start_utc, end_utc = checked_window(start, end)
        key = record_key(task, start_utc.isoformat(), end_utc.isoformat())
        removed = await self._call(
            "cancelling a backfill of", task, partial(self._delete, "backfill", key)
        )
        if removed:
            await self._move_mark("cancelling a backfill of", task)
        return removed

    # -- runtime schedules --------------------------------------------------------------

    async def add_schedule(self, name: str, descriptor: ScheduledDescriptor, *, by: str) -> bool:
        """Define schedule `name`; True when added, False when the same one exists.

        The descriptor is validated as a `@scheduled` task is at boot. A schedule of
        that name with other arguments raises `ScheduleConflict`: remove it first.
        """
        name, checked = checked_schedule(name, descriptor)
        schedule = RuntimeSchedule(
            name=name,
            descriptor=checked,
            by=checked_text(by, "who adds a schedule", required=True),
            added_at=await self.now(),
        )
        key = record_key(name)
        if await self._call(
            "adding schedule", name, partial(self._add, "schedule", key, encode(schedule))
        ):
            await self._record("schedule add", name, schedule.by, schedule.added_at, "added")
            return True
        text = await self._call("reading schedule", name, partial(self._get, "schedule", key))
        if text is None:  # removed between the two calls: add it again
            return await self.add_schedule(name, descriptor, by=by)
        existing = decode_schedule(text)
        if descriptor_fields(existing.descriptor) == descriptor_fields(checked):
            await self._record(
                "schedule add", name, schedule.by, schedule.added_at, "already there"
            )
            return False
        raise ScheduleConflict(
            f"runtime schedule {name!r} already exists with other arguments "
            f"({descriptor_fields(existing.descriptor)}, added by {existing.by!r}); "
            "remove it first to change it"
        )

    async def remove_schedule(self, name: str, *, by: str | None = None) -> bool:
        """Remove schedule `name`; whether it existed. `by` as for `resume`."""
        name = checked_text(name, "a runtime schedule's name", required=True)
        by = operator(by)
        at = await self.now()
        removed = await self._call(
            "removing schedule", name, partial(self._delete, "schedule", record_key(name))
        )
        await self._record("schedule remove", name, by, at, "removed" if removed else "absent")
        return removed

    # -- the audit trail ------------------------------------------------------------------

    async def changes(self, task: str | None = None, *, limit: int | None = None) -> list[Change]:
        """The operators' changes (of `task`, or all), newest first; `limit`: the newest."""
        texts = await self._call("listing", "changes", partial(self._values, "change"))
        found = sorted(
            (change for change in map(decode_change, texts) if task in {None, change.task}),
            key=lambda change: (change.at, change.id),
            reverse=True,
        )
        return found if limit is None else found[: max(limit, 0)]

    async def _record(self, what: ChangeKind, task: str, by: str, at: float, detail: str) -> None:
        change = Change(what=what, task=task, by=by, at=at, id=secrets.token_hex(16), detail=detail)
        await self._call(
            f"recording the {what} of",
            task,
            partial(self._add, "change", record_key(change.id), encode(change)),
        )
        try:
            await self._prune_changes()
        except ControlStoreError as err:  # the change stands; the next one prunes again
            logger.warning("the audit trail was not pruned: %s", err)
        await self._move_mark(f"recording the {what} of", task)

    async def _prune_changes(self) -> None:
        """Keep the newest `changes_kept` changes of the audit trail: delete the older."""
        texts = await self._call("listing", "changes", partial(self._values, "change"))
        if len(texts) <= self.changes_kept:
            return
        found = sorted(map(decode_change, texts), key=lambda change: (change.at, change.id))
        for old in found[: len(found) - self.changes_kept]:
            await self._call(
                "pruning the changes of",
                old.task,
                partial(self._delete, "change", record_key(old.id)),
            )

    async def schedules(self) -> list[RuntimeSchedule]:
        """Every runtime schedule, by name."""
        texts = await self._call("listing", "schedules", partial(self._values, "schedule"))
        return sorted((decode_schedule(text) for text in texts), key=lambda item: item.name)

    # -- the change mark -------------------------------------------------------------------

    async def change_mark(self) -> str | None:
        """A value that differs after every change made by any client (None before the
        first). Taking a trigger changes nothing other hosts need."""
        return await self._call(
            "reading", "the change mark", partial(self._get, "mark", CHANGE_MARK)
        )

    async def _move_mark(self, doing: str, subject: str) -> None:
        """Move the change mark, after the change itself: a poller that sees it moved
        then reads the change."""
        mark = secrets.token_hex(8)
        await self._call(doing, subject, partial(self._put, "mark", CHANGE_MARK, mark))
