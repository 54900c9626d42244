"""`current_fire()`: what a task body can know about the fire it is running.

The fire runner enters a `FireContext` around the body, in the thread that runs it
(an APScheduler executor thread, the `tick` process's main thread), through a
`contextvars.ContextVar`. So two fires running at once in two threads each see their
own, and code outside any fire sees None.

Limit: a thread the body starts itself does not inherit context variables (Python
starts every thread with an empty context). Hand it the body's context explicitly,
e.g. `executor.submit(contextvars.copy_context().run, work)`, or pass the
`FireContext` object along: it is immutable except for the live `lost`,
`timed_out` and `cancel_requested` flags.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from firefly_scheduling.fires.atomic import AtomicBlock, OutcomeSeat, idempotency_key

if TYPE_CHECKING:
    from firefly_scheduling.locks.holding import Holding


@dataclass(frozen=True, eq=False)
class FireContext:
    """One fire as its body sees it.

    * `target`: the task, `"pkg.module:function"`.
    * `instant`: the scheduled instant this fire is named by (aware, UTC); identical
      on every node.
    * `attempt`: 1 for the first run of this fire, 2 for the run that adopted it
      after the first runner died, and so on. Counted by the run history; without
      one it is always 1.
    * `token`: the fencing token of this run's hold on the task lock, strictly greater
      than every earlier holding's token of that lock name on that backend (None when
      the backend has no fencing or the task is unlocked). It orders holdings, not
      runs: an adopted fire and the fire that adopted it run one after the other
      under one holding and share its token. Stamp it on writes to a resource that
      refuses OLDER tokens (`>=`, not `>`); `(token, instant)` orders runs.
    * `node`: the name of the node running it.
    * `lost`: live. True once the backend reported the lock gone (a renewal refused,
      the session holding it ended), or once its lease lapsed by this process's
      monotonic clock without a renewal coming back, even while one is still in
      flight: the server may have freed it, and another node may now run the task
      too, so a body that can stop early should. Once True, it stays True.
    * `timed_out`: live. True once the body has run for its task's `timeout=`. Python
      cannot stop a thread, so a plain `def` body that can stop early should look at
      it; the run is recorded `timed_out` whenever it returns, and its task lock stays
      held (and renewed) until then. An `async def` body is cancelled at that moment.
    * `idempotency_key`: `"<target>@<instant>"`, the same on every attempt and node.
    * `atomic(...)`: the fire's success committed in the task's own transaction, or
      not at all (`fires.atomic`).
    * `cancel_requested`: live. True once a newer fire of an `overlap="cancel_other"`
      task asked this run to stop, from any node (`fires.cancel_watch`). A plain `def`
      body should stop early; an `async def` body is cancelled at that moment. Either
      way the run is recorded `cancelled`, and the newer fire runs once it returned.
    """

    target: str
    instant: datetime
    attempt: int
    token: int | None
    node: str
    lock_name: str | None
    lost_signal: threading.Event = field(default_factory=threading.Event, repr=False)
    #: The task lock's holding, whose lease the keep-alive extends (None: unlocked). A
    #: session backend's never lapses: only the keep-alive can report its loss.
    holding: Holding | None = field(default=None, repr=False)
    #: When the body times out, on the `time.monotonic()` clock (a clock no wall-clock
    #: step moves); None: the task has no `timeout=`.
    deadline: float | None = field(default=None, repr=False)
    #: Where `atomic` writes the fire's success (None: no history records this fire).
    outcome: OutcomeSeat | None = field(default=None, repr=False)
    #: Set when a newer fire asks this run to stop; None: the task cannot be asked.
    cancel_signal: threading.Event | None = field(default=None, repr=False)
    #: True for a fire missed while the whole fleet was down, run late within its
    #: task's `catchup=` window (`fires.catching_up`).
    caught_up: bool = False

    @property
    def lost(self) -> bool:
        """Whether this fire's lock was reported lost, or its lease lapsed, while it runs.

        The lapse is read here, not left to the keep-alive: a renewal stalled on a dead
        connection returns only at the driver's timeout, seconds after the server may
        have handed the lock to another node.
        """
        if self.lost_signal.is_set():
            return True
        holding = self.holding
        if holding is None or holding.released or not (holding.lost or holding.lapsed()):
            return False
        self.lost_signal.set()  # for good: a renewal coming back late cannot undo it
        return True

    @property
    def timed_out(self) -> bool:
        """Whether the body has run past its task's `timeout=` (never, without one)."""
        deadline = self.deadline
        return deadline is not None and time.monotonic() >= deadline

    @property
    def cancel_requested(self) -> bool:
        """Whether a newer fire asked this run to stop (`overlap="cancel_other"` only)."""
        signal = self.cancel_signal
        return signal is not None and signal.is_set()

    def seconds_left(self) -> float | None:
        """Seconds until the body times out (0.0 once it has); None without a timeout."""
        deadline = self.deadline
        return None if deadline is None else max(deadline - time.monotonic(), 0.0)

    @property
    def idempotency_key(self) -> str:
        """A key naming this fire, the same on every attempt and node (`target@instant`):
        for side effects outside the task's transaction (an HTTP call) that a retry or
        an adoption could repeat."""
        return idempotency_key(self.target, self.instant)

    def atomic(self, connection: object | None = None, *, using: str | None = None) -> AtomicBlock:
        """The fire's success committed in the task's own transaction, or not at all.

        `with current_fire().atomic(session):` (a SQLAlchemy `Session`, or a `Connection`
        inside `begin()`), `with current_fire().atomic(conn):` (psycopg 3),
        `async with current_fire().atomic(async_session):` (asyncio SQLAlchemy or
        psycopg), `with current_fire().atomic(using="default"):` (Django: the block is
        `transaction.atomic`). See `fires.atomic` and docs/effectively-once.md.
        """
        return AtomicBlock(self, connection, using)


_CURRENT: ContextVar[FireContext | None] = ContextVar("firefly_current_fire", default=None)


def current_fire() -> FireContext | None:
    """The fire the calling code runs in, or None outside any fire."""
    return _CURRENT.get()


@contextmanager
def entered(context: FireContext) -> Iterator[FireContext]:
    """Make `context` the current fire for the duration of the block (re-entrant)."""
    reset = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(reset)
