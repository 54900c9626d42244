"""`AsyncPauseReader`: the pauses a fire meets just before its run starts.

Written once, for asyncio; `fires/pausing.py` is generated from it by
`tools/async_to_sync.py`.

The start stage (`fires.starting`) reads the control store's pauses after the fire's
claim is won and its task lock taken, just before it writes the run's start and runs
the body: one round trip (the store's listing of pauses: one `HVALS`, `SELECT` or
range read), and one for a whole batch of fires claimed together. Nothing is cached:
a pause written before the read is seen by it, so once `pause` returns, a fire whose
start comes after it is skipped, on every node. A fire that read its pauses just
before the pause landed has an instant before it, and runs: a run already going
finishes. Resume is from now: the store keeps the stretch a resume lifted, and a fire
of the schedule due inside it that reads the pauses after the resume (a late start)
is skipped too.

A store that fails the read leaves the pauses unknown; the policy then skips the
fire (fail closed, `policy.pause_answer`). Without a durable control store
(`control.selection` refuses one: memcached, `none`, `memory` with no
`firefly.scheduling.control.url`), `pause_reader` logs once that steering needs one
(a warning on a lock server's provider, such as memcached; an info line for the
in-process `none` and `memory`, which coordinate no fleet), and nothing is read.
"""

# async-to-sync: rename AsyncPauseReader PauseReader
# async-to-sync: rename AsyncControlStore ControlStore
# async-to-sync: rename resolve_async_control_store resolve_control_store

from __future__ import annotations

import logging
from collections.abc import Sequence

from firefly_scheduling.control.records import ALL_TASKS, ControlStoreError, Pause
from firefly_scheduling.control.selection import control_store_url, resolve_async_control_store
from firefly_scheduling.control.store_async import AsyncControlStore
from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.fires.policy import NOT_PAUSED, BeforeStart
from firefly_scheduling.providers.building import registered_provider
from firefly_scheduling.settings import Settings

logger = logging.getLogger("firefly_scheduling.fires")


class AsyncPauseReader:
    """Reads the pauses of fires from one control store; thread-safe as the store is.

    `owns_store`: `aclose` closes the store (the runner built it from settings).
    """

    def __init__(self, store: AsyncControlStore, *, owns_store: bool = False) -> None:
        self._store = store
        self._owns_store = owns_store

    async def facts(self, fires: Sequence[Fire]) -> list[BeforeStart]:
        """What each of `fires` meets: the pause holding its task, or why it is unknown.

        One read of the store for all of them, none when `fires` is empty.
        """
        if not fires:
            return []
        try:
            state = await self._store.pause_state()
        except ControlStoreError as err:
            unknown = BeforeStart(unknown=str(err))
            return [unknown for _ in fires]
        if not state.in_force and not state.lifted:  # the common answer: never paused
            return [NOT_PAUSED for _ in fires]
        by_task = {pause.task: pause for pause in state.in_force}
        everything = by_task.get(ALL_TASKS)
        return [
            BeforeStart(
                pause=everything or by_task.get(fire.target),
                lifted=_stretch_holding(fire, state.lifted),
            )
            for fire in fires
        ]

    async def aclose(self) -> None:
        if self._owns_store:
            await self._store.aclose()


def _stretch_holding(fire: Fire, lifted: Sequence[Pause]) -> Pause | None:
    """The lifted pause of `fire`'s task (or of every task) whose stretch holds its
    instant: a fire due while paused, read after the resume."""
    if not lifted:
        return None
    instant = fire.instant.timestamp()
    for pause in lifted:
        if pause.task in {ALL_TASKS, fire.target} and pause.holds(instant):
            return pause
    return None


def pause_reader(settings: Settings) -> AsyncPauseReader | None:
    """The pause reader of a host configured by `settings`, or None without a durable store.

    A control URL that is set but unusable is refused (`ConfigurationError`, at boot).
    With none set and a lock backend that keeps no control store, a warning says once
    that steering needs one, and fires are never checked for pauses.
    """
    if not settings.control_url.strip():
        try:
            control_store_url(settings)
        except ConfigurationError as err:
            provider = registered_provider(settings)
            on_a_server = provider is not None and provider.takes_url
            logger.log(
                logging.WARNING if on_a_server else logging.INFO,
                "steering (pauses, triggers, backfills, runtime schedules) needs a durable "
                "control store; this host has none, so it checks no fire for a pause and "
                "runs no trigger, backfill or runtime schedule: %s",
                err,
            )
            return None
    return AsyncPauseReader(resolve_async_control_store(settings), owns_store=True)
