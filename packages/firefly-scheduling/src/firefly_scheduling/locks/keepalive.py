"""Keep-alive: renew held locks while their holders work, from one thread per process.

Shared by the fire runner (a task's lock while its body runs) and plain holds
(`hold(..., keep_alive=True)`, `leadership`), so a process has one renewer whatever
renews through it.

A lease shorter than the task would let a second node start while the first still
runs; a lease as long as the longest imaginable run would keep a died node's task
blocked for as long. So the lease stays short (`lock_ttl`) and is renewed every
`lock_ttl / 3` while the body runs.

One `Renewer` thread (and its lapse watch, below) serves every keep-alive of the
process (a thread per fire costs a thread start per fire and a thread per running
body). It keeps a heap of due renewals and renews each HOLDING, never a name, so a
lapsed holding's renewal can never extend a newer holding of the same name.
Renewals run one after another: one stuck on a dead connection delays the others by
at most the backend's timeout, and such a fault usually hits them all anyway.
Starting or stopping a keep-alive wakes the thread only when it must renew sooner
than it planned to: a stopped one is dropped when it reaches the head of the heap,
or by the next keep-alive started, so a fire pays no thread switch for its
keep-alive.

On a session backend (PostgreSQL, MySQL) the TTL means nothing; the same call asks
the server whether the session still holds the lock, which is how a killed session
is noticed while the body runs.

A renewal the server refuses marks the holding lost for good; a renewal that fails
(the backend is unreachable) is tried again half an interval later, and the holding
is lost once its lease lapsed without one succeeding. A renewal that hangs (a frozen
connection) answers only at the driver's timeout, long after the server may have
handed the name to another node, and holds up the renewals queued behind it: so
while one is in flight, a second thread (the lapse watch) marks lost every holding
of a lease backend whose lease passes meanwhile, by this process's monotonic clock.
Lost: the keep-alive logs it with the task's name, sets the `lost` event the body
sees through `current_fire().lost` (and a waiting fire's wait ends on), and stops.
Nothing interrupts the body: Python cannot stop a thread safely, and only the body
knows whether stopping halfway is better than finishing. Its history write is then
fenced if another node adopted the fire.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar

from firefly_scheduling.locks.holding import Holding
from firefly_scheduling.locks.port import HoldingLock

logger = logging.getLogger("firefly_scheduling.locks.keepalive")


class KeepAliveStats:
    """Process-wide counts for metrics: renewals that failed (and were retried).

    A plain counter behind a lock: telemetry reads it from an observable counter, so
    the keep-alive needs no hook and pays one increment per failure.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._failed_renewals = 0

    @property
    def failed_renewals(self) -> int:
        return self._failed_renewals

    def renewal_failed(self) -> None:
        with self._mutex:
            self._failed_renewals += 1


KEEPALIVE_STATS = KeepAliveStats()

#: Renewals per lease: the lease survives `RENEWALS_PER_TTL - 1` failed or late ones.
RENEWALS_PER_TTL = 3
#: Longest `KeepAlive.stop()` waits for a renewal of its holding already in flight.
STOP_TIMEOUT_SECONDS = 10.0
#: Makes a loss reported once, when the renewer and the lapse watch see it together.
_REPORTING = threading.Lock()
#: Why a holding is lost when its lease passed while a renewal was in flight.
LAPSED_UNANSWERED = "its lease lapsed while a renewal was still unanswered"


_Lock = TypeVar("_Lock")


class Watched(Generic[_Lock]):
    """A holding kept alive, whichever flavour keeps it: what `judge_renewal` reads.

    `interval` defaults to `ttl_seconds / 3`. `lost` is the event set when the
    holding is lost; pass your own to share it (the fire's context holds it).
    `on_lost` is called then too, from the renewer (asyncio: on the loop).
    """

    def __init__(
        self,
        lock: _Lock,
        holding: Holding,
        ttl_seconds: float,
        *,
        interval: float | None = None,
        lost: threading.Event | None = None,
        on_lost: Callable[[], None] | None = None,
        label: str = "",
    ) -> None:
        self.lock = lock
        self.holding = holding
        self.ttl_seconds = ttl_seconds
        self.interval = ttl_seconds / RENEWALS_PER_TTL if interval is None else interval
        if not self.interval > 0:
            raise ValueError(f"keep-alive interval must be > 0, got {interval!r}")
        self.lost = threading.Event() if lost is None else lost
        #: Called once, with `lost` set, when the holding is lost (an asyncio waiter's wake).
        self.on_lost = on_lost
        self.label = label or holding.name
        self.stopped = False
        self.renewing = False
        #: The loss was reported (`report_lost`): once only, whichever thread saw it.
        self.reported = False
        #: The server ends the lease by itself at its TTL (not a session lock), so a
        #: lapse by this process's clock means the name may be another's now.
        self.lapses = bool(getattr(lock, "ttl_honoured", False))


class KeepAlive(Watched[HoldingLock]):
    """Renews `holding` on `lock` every `interval` seconds until `stop()`.

    Use it as a context manager around the body. `start(renewer)` hands it to a
    `Renewer` of the caller's (tests), by default the process's shared one.
    """

    _renewer: Renewer | None = None

    def start(self, renewer: Renewer | None = None) -> KeepAlive:
        self._renewer = renewer
        (self._renewer or Renewer.shared()).watch(self)
        return self

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """Stop renewing; wait (at most `timeout` s) for a renewal of this holding in flight.

        Call it before releasing the holding: a renewal racing a release would report
        the released lock as lost.
        """
        (self._renewer or Renewer.shared()).unwatch(self, timeout)

    def __enter__(self) -> KeepAlive:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class Renewer:
    """One daemon thread renewing every watched holding at its own interval."""

    _shared: Renewer | None = None
    _shared_mutex = threading.Lock()

    def __init__(self) -> None:
        mutex = threading.Lock()
        self._condition = threading.Condition(mutex)
        #: Wakes the lapse watch (`_watch_lapses`); it shares the renewer's mutex.
        self._lapse_watch = threading.Condition(mutex)
        self._in_flight: KeepAlive | None = None
        #: When the lapse watch, waiting, wakes by itself (infinite: only when notified).
        self._watch_wakes_at = math.inf
        self._due: list[tuple[float, int, KeepAlive]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        #: When the thread, waiting, wakes by itself (infinite: only when notified).
        self._wakes_at = math.inf

    @classmethod
    def shared(cls) -> Renewer:
        """The process's renewer (a forked child gets its own: threads do not survive a
        fork, and `_forget_after_fork` clears it there). Read without the mutex once
        made: every fire of a node asks for it twice, from up to 64 threads."""
        shared = cls._shared
        if shared is not None:
            return shared
        with cls._shared_mutex:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def watched(self) -> int:
        """How many keep-alives are waiting for their next renewal."""
        with self._condition:
            return sum(1 for _, _, keep in self._due if not keep.stopped)

    def watch(self, keep: KeepAlive) -> None:
        with self._condition:
            keep.stopped = False
            self._drop_stopped()
            at = time.monotonic() + keep.interval
            self._schedule(keep, at)
            if at < self._wakes_at:
                self._condition.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="firefly-keepalive", daemon=True
                )
                self._thread.start()
                threading.Thread(
                    target=self._watch_lapses, name="firefly-keepalive-lapses", daemon=True
                ).start()

    def unwatch(self, keep: KeepAlive, timeout: float) -> None:
        with self._condition:
            keep.stopped = True  # the thread drops it unrenewed: no need to wake it
            self._condition.wait_for(lambda: not keep.renewing, timeout=max(timeout, 0.0))
            if keep.renewing:
                logger.warning(
                    "%s: a renewal of the lock %r is still in flight after %.1f s",
                    keep.label,
                    keep.holding.name,
                    timeout,
                )

    def _schedule(self, keep: KeepAlive, at: float) -> None:
        heapq.heappush(self._due, (at, next(self._order), keep))

    def _drop_stopped(self) -> None:
        """Pop the stopped keep-alives at the head of the heap (under the condition)."""
        while self._due and self._due[0][2].stopped:
            heapq.heappop(self._due)

    def _run(self) -> None:
        while True:
            with self._condition:
                keep = self._next_due()
                keep.renewing = True
                self._watch_while_renewing(keep)
            try:
                renewed = self._renew(keep)
            finally:
                with self._condition:
                    keep.renewing = False
                    self._in_flight = None
                    self._condition.notify_all()
                    if not keep.stopped and renewed is not None:
                        delay = keep.interval if renewed else keep.interval / 2
                        self._schedule(keep, time.monotonic() + delay)

    def _next_due(self) -> KeepAlive:
        """Wait for the next live keep-alive that is due (called under the condition)."""
        while True:
            self._drop_stopped()
            if not self._due:
                self._wakes_at = math.inf
                self._condition.wait()
                continue
            at, _, keep = self._due[0]
            wait = at - time.monotonic()
            if wait <= 0:
                heapq.heappop(self._due)
                return keep
            self._wakes_at = at
            self._condition.wait(wait)

    def _watch_while_renewing(self, keep: KeepAlive) -> None:
        """`keep`'s renewal is about to be sent: the lapse watch looks out while it is
        in flight, woken only when it would look too late (under the condition)."""
        self._in_flight = keep
        if keep.lapses and keep.holding.expires_at < self._watch_wakes_at:
            self._lapse_watch.notify()

    def _watch_lapses(self) -> None:
        while True:
            with self._condition:
                lapsed = self._lapsed_while_renewing()
            for keep in lapsed:
                if keep.holding.lapsed():  # not renewed since, in the meantime
                    report_lost(keep, LAPSED_UNANSWERED)

    def _lapsed_while_renewing(self) -> list[KeepAlive]:
        """Wait until a lease lapses while a renewal is in flight; the keep-alives whose
        leases did (called under the condition). The renewals due meanwhile wait
        behind the one in flight, so their leases are watched too."""
        while True:
            in_flight = self._in_flight
            if in_flight is None:
                self._watch_wakes_at = math.inf
                self._lapse_watch.wait()
                continue
            now = time.monotonic()
            watched = [in_flight, *(keep for _, _, keep in self._due)]
            live = [keep for keep in watched if keep.lapses and _unreported(keep)]
            lapsed = [keep for keep in live if keep.holding.expires_at <= now]
            if lapsed:
                return lapsed
            self._watch_wakes_at = min((k.holding.expires_at for k in live), default=math.inf)
            self._lapse_watch.wait(None if not live else self._watch_wakes_at - now)

    @staticmethod
    def _renew(keep: KeepAlive) -> bool | None:
        """Renew once: True renewed, False failed (try again soon), None lost (stop)."""
        try:
            renewed = keep.lock.renew_holding(keep.holding, keep.ttl_seconds)
        except Exception:  # a bug in a backend must not kill every keep-alive silently
            logger.exception("%s: renewing the lock %r raised", keep.label, keep.holding.name)
            renewed = False
        return judge_renewal(keep, renewed)


def _forget_after_fork() -> None:
    """In a forked child: its parent's renewer has no thread here."""
    Renewer._shared = None
    Renewer._shared_mutex = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def judge_renewal(keep: Watched[Any], renewed: bool) -> bool | None:
    """What one renewal means: True renewed, False failed (try again soon), None stop.

    Shared by the renewer thread and the asyncio keep-alive (`locks.asyncio_keepalive`),
    so both flavours mark a holding lost, and say so, by the same rule.
    """
    holding = keep.holding
    if keep.reported or holding.released:
        return None  # lost already (the lapse watch), or given back
    if renewed:
        return True
    KEEPALIVE_STATS.renewal_failed()
    if not holding.lost:
        return False
    report_lost(keep, "the backend no longer holds it, or its lease lapsed")
    return None


def report_lost(keep: Watched[Any], why: str) -> None:
    """Mark `keep`'s holding lost, say so, and tell its holder (`lost`, `on_lost`),
    once; nothing for a keep-alive stopped or a holding released meanwhile."""
    holding = keep.holding
    with _REPORTING:
        if not _unreported(keep):
            return
        keep.reported = True
    holding.lost = True  # for good: a renewal answered late cannot undo it
    keep.lost.set()
    if keep.on_lost is not None:
        keep.on_lost()
    logger.error(
        "%s: the lock %r is lost while the body runs (%s); another node may start this "
        "task meanwhile, and writes of this run will be fenced if it does",
        keep.label,
        holding.name,
        why,
    )


def _unreported(keep: Watched[Any]) -> bool:
    """Whether `keep` still renews a holding whose loss nobody reported yet."""
    return not (keep.stopped or keep.reported or keep.holding.released)
