# async-to-sync: rename AsyncControlStore ControlStore
"""Asking a fleet for a manual trigger or a backfill: the calls the public API makes.

`trigger` and `backfill` write an operator's request to the control store, and
nothing else: the nodes hosting the task pick it up (`hosts.runtime.steering`),
a resident node within its steering poll, `tick` in its next pass.

* A trigger is one extra run of the task, now, taken by exactly one node
  (`ControlStore.take_trigger`). Its fire is named by the trigger's time on the
  store's clock (`Trigger.requested_at`), recorded with trigger `manual`, and runs
  even while the task is paused (an operator's explicit act). It follows the
  task's `overlap=` like any fire: with `skip` (the default), a trigger that comes
  while a run of the task holds its lock is recorded skipped, with the reason.
* A backfill replays the schedule's instants in `[start, end)` that have no
  successful run in the history, oldest first, one at a time; asking for the same
  window twice is one request, and a success is never run again. It needs a run
  history: without one it is refused here, before anything is stored.

Written once, for asyncio; the synchronous twin `control/triggers.py` is generated
from it by `tools/async_to_sync.py`.
"""

from __future__ import annotations

from datetime import datetime

from firefly_scheduling.control.records import Backfill, Trigger, checked_window
from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.selection import HISTORY_KEY, history_url
from firefly_scheduling.settings import Settings, env_var


async def trigger(store: AsyncControlStore, task: str, *, by: str) -> Trigger:
    """Ask for one extra run of `task` now; the pending trigger, as stored."""
    return await store.request_trigger(task, by=by)


async def backfill(
    store: AsyncControlStore,
    task: str,
    start: datetime,
    end: datetime,
    *,
    by: str,
    settings: Settings,
) -> Backfill:
    """Ask for the schedule's instants of `task` in `[start, end)` without a success.

    A `ConfigurationError` when `settings` configure no run history (a backfill
    cannot know which instants succeeded), or for a naive or empty window, naming
    the value.
    """
    checked_window(start, end)
    if history_url(settings) is None:
        raise ConfigurationError(
            f"a backfill of {task!r} needs a run history, to know which instants already "
            f"succeeded; none is configured ({env_var(HISTORY_KEY)} is off, or the "
            f"{settings.lock_provider!r} lock provider keeps none)"
        )
    return await store.request_backfill(task, start, end, by=by)
