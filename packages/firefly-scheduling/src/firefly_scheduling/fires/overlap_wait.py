# Generated from overlap_wait_async.py by tools/async_to_sync.py: do not edit.
# Edit the asyncio source and run `python tools/async_to_sync.py`.
"""`buffer_one` and `buffer_all`: a fire that waits for the runs of its task to end.

Written once, for asyncio, in `fires/overlap_wait_async.py`; `fires/overlap_wait.py`
is generated from it by `tools/async_to_sync.py`.

The lock stage (`fires.locking`) hands a fire here when its task lock is held and
the policy answers `WaitTurn`. Every name below is an ordinary lock on the task
lock's own backend (`fires.overlap_names`), so what it bounds holds across the
fleet exactly as the task lock does:

* **A waiting slot.** The fire takes the first free one of its task's slots (one
  for `buffer_one`, `BUFFER_ALL_MAX_WAITING` for `buffer_all`); a fire that finds
  every slot taken is skipped as overlapping, recorded with why.
* **Its place in the queue** (`buffer_all`). It holds a marker named by its
  instant while it waits, and waits for the marker of the fire scheduled just
  before it to be free (that fire started, or never waited) before it waits for
  the task lock; holding the lock, it looks once more, and lets the lock go again
  if that fire came meanwhile: fires run oldest first, whatever order they came in.
* **The task lock**, waited for with the backend's own waiting acquisition
  (`acquire(wait=...)`: the server's queue, a release notification, or a capped
  backoff), in rounds of one `lock_ttl`.

What it holds is renewed while it waits (`locks.keepalive`) and given back the
moment it holds the task lock (or gives up), so the next fire may wait while this
one runs.

Faults: a waiting node that dies (or stalls past `lock_ttl`) stops renewing, and
its slot and marker lapse after `lock_ttl`: the next fires go on; the fire that
waited is never run (its claim is the dead node's), and its record stays `buffered`
(written when it began to wait; its start would have replaced it). A renewal that
fails ends the wait: the fire is never run without its lock, and its record
likewise stays `buffered`, the skip logged. A slot whose lease had lapsed by the
time its grant was acted on (the node stalled, or the answer came late) may be
another fire's already: the fire gives it back and is skipped, recorded with why.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from firefly_scheduling.errors import LockBackendError
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.policy import Skip, WaitTurn
from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.keepalive import KeepAlive
from firefly_scheduling.locks.port import HoldingLock

if TYPE_CHECKING:
    from firefly_scheduling.fires.recording import RunRecorder

logger = logging.getLogger("firefly_scheduling.fires")

#: The reason a buffered fire's record holds while it waits, before the lock's name.
WAITS_FOR = "buffered: it waits for the earlier run holding the task lock"
#: Why a buffered fire is skipped when its waiting slot was lost.
SLOT_LOST = "its waiting slot was lost while it was buffered (the backend failed or it stalled)"
#: Why a fire is skipped when the grant of its waiting slot came too late to count on.
SLOT_LAPSED = (
    "its waiting slot lapsed before it could wait (it stalled, or the backend's answer came late)"
)


class OverlapWaiter:
    """Waits for a held task lock in one of its task's waiting slots; thread-safe.

    `holdings` is the runner's lock (the task lock's), `record` where the fire is
    marked `buffered` while it waits, `fenced` whether its task locks are taken
    fenced, `renewable` whether a slot can be kept alive (a backend that cannot renew
    keeps a slot for one `lock_ttl` only, so a fire waits one round at most).
    """

    def __init__(
        self,
        holdings: HoldingLock,
        *,
        record: RunRecorder,
        fenced: bool,
        renewable: bool,
        keepalive_interval: float | None,
    ) -> None:
        self._holdings = holdings
        self._record = record
        self._fenced = fenced
        self._renewable = renewable
        self._keepalive_interval = keepalive_interval

    def wait_turn(
        self, fire: Fire, turn: WaitTurn, ttl: float
    ) -> tuple[Holding | Skip | LockBackendError, float]:
        """`fire`'s task lock once the runs before it ended, taken while holding a
        waiting slot (and its queue marker); or why the fire does not wait (`Skip`),
        or the backend's error.

        The second value is how many seconds the fire waited (0.0: it did not).
        """
        try:
            slot = self._first_free(turn.slots, ttl, turn.patience)
        except LockBackendError as err:
            return err, 0.0
        if slot is None:
            return Skip(Verdict.OVERLAPPING, turn.full), 0.0
        if slot.lapsed():
            # Granted, but its lease may have ended on the server before the answer was
            # acted on (the node stalled, or the reply came late): another fire may wait
            # in it already, and a lapsed lease is never renewed.
            self._holdings.release_holding(slot)
            return Skip(Verdict.OVERLAPPING, SLOT_LAPSED), 0.0
        began = time.monotonic()
        waiting = _Waiting()
        self._keep(fire, slot, ttl, waiting)
        try:
            answer = self._queued(fire, turn, ttl, waiting)
        finally:
            for keepalive in waiting.keepalives:
                keepalive.stop()
            for holding in waiting.held:
                self._holdings.release_holding(holding)
        return answer, time.monotonic() - began

    def _first_free(self, slots: tuple[str, ...], ttl: float, patience: float) -> Holding | None:
        """The first of `slots` this fire could take, in order, waiting up to
        `patience` seconds for each; None when all are held."""
        for name in slots:
            slot = self._holdings.acquire(name, ttl, wait=patience)
            if slot is not None:
                return slot
        return None

    def _queued(
        self, fire: Fire, turn: WaitTurn, ttl: float, waiting: _Waiting
    ) -> Holding | Skip | LockBackendError:
        """Its marker taken (`buffer_all`), then it is buffered: logged and recorded, so
        a fire recorded `buffered` holds its place; then the task lock in its turn."""
        lock_name = fire.task.lock_name or fire.target
        if turn.marker is not None:
            try:
                marker = self._take(turn.marker, ttl, waiting.lost, fenced=False)
            except LockBackendError as err:
                return err
            if not isinstance(marker, Holding):
                return marker
            self._keep(fire, marker, ttl, waiting)
        logger.info(
            "%s: fire %s buffered: it waits for the run holding %r",
            fire.target,
            fire.instant.isoformat(),
            lock_name,
        )
        self._record.buffered(fire, f"{WAITS_FOR} {lock_name!r}")
        return self._in_turn(fire, turn, ttl, waiting)

    def _in_turn(
        self, fire: Fire, turn: WaitTurn, ttl: float, waiting: _Waiting
    ) -> Holding | Skip | LockBackendError:
        """The task lock, once no fire before this one waits: the lock is given back
        and waited for again while the fire before it still waits."""
        lock_name = fire.task.lock_name or fire.target
        lost = waiting.lost
        try:
            while True:
                if turn.after is not None:
                    before = self._take(turn.after, ttl, lost, fenced=False)
                    if not isinstance(before, Holding):
                        return before
                    self._holdings.release_holding(before)  # it waits no more
                holding = self._take(lock_name, ttl, lost, fenced=self._fenced)
                if not isinstance(holding, Holding) or turn.after is None:
                    return holding
                if self._nobody_holds(turn.after, ttl, holding):
                    return holding
                # The fire before it came while this one waited for the lock: it goes first.
                self._holdings.release_holding(holding)
        except LockBackendError as err:
            return err

    def _nobody_holds(self, name: str, ttl: float, holding: Holding) -> bool:
        """Whether `name` is free (tried, and given back at once); `holding` is given
        back if the backend fails meanwhile."""
        try:
            probe = self._holdings.acquire(name, ttl)
        except LockBackendError:
            self._holdings.release_holding(holding)
            raise
        if probe is None:
            return False
        self._holdings.release_holding(probe)
        return True

    def _take(
        self, name: str, ttl: float, lost: threading.Event, *, fenced: bool
    ) -> Holding | Skip:
        """`name`, waited for in rounds of one `ttl` while this fire's slot is kept."""
        while True:
            holding = self._holdings.acquire(name, ttl, wait=ttl, fenced=fenced)
            if holding is not None:
                return holding
            if lost.is_set() or not self._renewable:
                return Skip(Verdict.OVERLAPPING, SLOT_LOST)

    def _keep(self, fire: Fire, holding: Holding, ttl: float, waiting: _Waiting) -> None:
        """Hold `holding` until the wait ends, renewed where the backend can."""
        waiting.held.append(holding)
        if self._renewable:
            keepalive = KeepAlive(
                self._holdings,
                holding,
                ttl,
                interval=self._keepalive_interval,
                lost=waiting.lost,
                label=f"{fire.target} @ {fire.instant.isoformat()} ({holding.name})",
            )
            waiting.keepalives.append(keepalive.start())


@dataclass
class _Waiting:
    """What a waiting fire holds (given back when the wait ends), and whether a
    renewal of any of it failed (`lost`)."""

    lost: threading.Event = field(default_factory=threading.Event)
    held: list[Holding] = field(default_factory=list)
    keepalives: list[KeepAlive] = field(default_factory=list)
