"""`current_fire()`: what a task body can know about the fire it is running.

The fire runner enters a `FireContext` around the body, in the thread that runs it
(an APScheduler executor thread, the `tick` process's main thread), through a
`contextvars.ContextVar`. So two fires running at once in two threads each see their
own, and code outside any fire sees None.

Limit: a thread the body starts itself does not inherit context variables (Python
starts every thread with an empty context). Hand it the body's context explicitly,
e.g. `executor.submit(contextvars.copy_context().run, work)`, or pass the
`FireContext` object along: it is immutable except for the live `lost` and
`timed_out` flags.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime


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
    * `lost`: live. True once a keep-alive renewal failed or the backend reported the
      session holding the lock gone: another node may now run the task too, so a body
      that can stop early should.
    * `timed_out`: live. True once the body has run for its task's `timeout=`. Python
      cannot stop a thread, so a plain `def` body that can stop early should look at
      it; the run is recorded `timed_out` whenever it returns, and its task lock stays
      held (and renewed) until then. An `async def` body is cancelled at that moment.
    """

    target: str
    instant: datetime
    attempt: int
    token: int | None
    node: str
    lock_name: str | None
    lost_signal: threading.Event = field(default_factory=threading.Event, repr=False)
    #: When the body times out, on the `time.monotonic()` clock (a clock no wall-clock
    #: step moves); None: the task has no `timeout=`.
    deadline: float | None = field(default=None, repr=False)
    #: True for a fire missed while the whole fleet was down, run late within its
    #: task's `catchup=` window (`fires.catching_up`).
    caught_up: bool = False

    @property
    def lost(self) -> bool:
        """Whether this fire's lock was reported lost while it runs."""
        return self.lost_signal.is_set()

    @property
    def timed_out(self) -> bool:
        """Whether the body has run past its task's `timeout=` (never, without one)."""
        deadline = self.deadline
        return deadline is not None and time.monotonic() >= deadline

    def seconds_left(self) -> float | None:
        """Seconds until the body times out (0.0 once it has); None without a timeout."""
        deadline = self.deadline
        return None if deadline is None else max(deadline - time.monotonic(), 0.0)


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
