# async-to-sync: rename AsyncOverlapWaiter OverlapWaiter
# async-to-sync: rename AsyncKeepAlive KeepAlive
# async-to-sync: rename AsyncRunRecorder RunRecorder
# async-to-sync: rename firefly_scheduling.locks.asyncio_keepalive firefly_scheduling.locks.keepalive  # noqa: E501
"""`buffer_one`: a fire that waits, fleet-wide alone, for the run of its task to end.

Written once, for asyncio, in `fires/overlap_wait_async.py`; `fires/overlap_wait.py`
is generated from it by `tools/async_to_sync.py`.

The lock stage (`fires.locking`) hands a fire here when its task lock is held and
the policy answers `WaitTurn` (`overlap="buffer_one"`). The fire first takes its
task's one **waiting slot**: an ordinary lock, `firefly:overlap-waiting:<lock>`,
on the same backend as the task lock, so "at most one waiting fire per task" holds
across the fleet exactly as the task lock does. A fire that finds the slot taken is
skipped as overlapping. The slot's holder waits for the task lock with the
backend's own waiting acquisition (`acquire(wait=...)`: the server's queue, a
release notification, or a capped backoff), in rounds of one `lock_ttl`, and keeps
the slot renewed meanwhile (`locks.keepalive`). It gives the slot back the moment it
holds the task lock, so the next fire may wait while this one runs.

Faults: a waiting node that dies (or stalls past the slot's TTL) stops renewing
the slot, which lapses after `lock_ttl`: the next fire may wait in it; the fire
that waited is never run (its claim is the dead node's), and its record stays
`buffered` (written when it began to wait; its start would have replaced it). A slot
whose renewal fails ends the wait: the fire is never run without its lock, and its
record likewise stays `buffered`, the skip logged.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.policy import Skip, WaitTurn
from firefly_scheduling.locks.asyncio_keepalive import AsyncKeepAlive
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import AsyncHoldingLock

if TYPE_CHECKING:
    from firefly_scheduling.fires.recording_async import AsyncRunRecorder

logger = logging.getLogger("firefly_scheduling.fires")

#: Why a fire of a `buffer_one` task is skipped when another fire waits already.
ANOTHER_FIRE_WAITS = "another fire of the task is already buffered (overlap='buffer_one')"
#: The reason a buffered fire's record holds while it waits, before the lock's name.
WAITS_FOR = "buffered: it waits for the earlier run holding the task lock"
#: Why a buffered fire is skipped when its waiting slot was lost.
SLOT_LOST = "its waiting slot was lost while it was buffered (the backend failed or it stalled)"


class AsyncOverlapWaiter:
    """Waits for a held task lock in its task's one waiting slot; thread-safe.

    `holdings` is the runner's lock (the task lock's), `record` where the fire is
    marked `buffered` while it waits, `fenced` whether its task
    locks are taken fenced, `renewable` whether a slot can be kept alive (a backend
    that cannot renew keeps the slot for one `lock_ttl` per round only).
    """

    def __init__(
        self,
        holdings: AsyncHoldingLock,
        *,
        record: AsyncRunRecorder,
        fenced: bool,
        renewable: bool,
        keepalive_interval: float | None,
    ) -> None:
        self._holdings = holdings
        self._record = record
        self._fenced = fenced
        self._renewable = renewable
        self._keepalive_interval = keepalive_interval

    async def wait_turn(
        self, fire: Fire, turn: WaitTurn, ttl: float
    ) -> tuple[Holding | Skip | LockBackendError, float]:
        """`fire`'s task lock once the run holding it ended, taken with the waiting slot
        `turn.slot` held; or why the fire does not wait (`Skip`) or the backend's error.

        The second value is how many seconds the fire waited (0.0: it did not).
        """
        lock_name = fire.task.lock_name or fire.target
        try:
            slot = await self._holdings.acquire(turn.slot, ttl)
        except LockBackendError as err:
            return err, 0.0
        if slot is None:
            return Skip(Verdict.OVERLAPPING, ANOTHER_FIRE_WAITS), 0.0
        logger.info(
            "%s: fire %s buffered: it waits for the run holding %r",
            fire.target,
            fire.instant.isoformat(),
            lock_name,
        )
        began = time.monotonic()
        lost = threading.Event()
        keepalive = self._keep_alive(fire, slot, ttl, lost)
        try:
            await self._record.buffered(fire, f"{WAITS_FOR} {lock_name!r}")
            answer = await self._wait_for_lock(lock_name, ttl, lost)
        finally:
            if keepalive is not None:
                await keepalive.stop()
            await self._holdings.release_holding(slot)
        return answer, time.monotonic() - began

    async def _wait_for_lock(
        self, lock_name: str, ttl: float, lost: threading.Event
    ) -> Holding | Skip | LockBackendError:
        """Rounds of one `ttl` of waiting for `lock_name`, while the slot is kept."""
        while True:
            try:
                holding = await self._holdings.acquire(
                    lock_name, ttl, wait=ttl, fenced=self._fenced
                )
            except LockBackendError as err:
                return err
            if holding is not None:
                return holding
            if lost.is_set() or not self._renewable:
                return Skip(Verdict.OVERLAPPING, SLOT_LOST)

    def _keep_alive(
        self, fire: Fire, slot: Holding, ttl: float, lost: threading.Event
    ) -> AsyncKeepAlive | None:
        if not self._renewable:
            return None
        return AsyncKeepAlive(
            self._holdings,
            slot,
            ttl,
            interval=self._keepalive_interval,
            lost=lost,
            label=f"{fire.target} @ {fire.instant.isoformat()} (waiting slot)",
        ).start()
