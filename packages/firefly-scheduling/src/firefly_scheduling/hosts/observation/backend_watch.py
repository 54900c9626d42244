"""`BackendWatch`: a lock backend that stops answering after boot is said, once, at ERROR.

Once a host runs, a lock server that goes away does not stop it: every fire is
skipped, never run unlocked, and comes back as soon as the server answers. A host
that exited instead would drop the fires in flight and, under a supervisor, restart
into the boot wait (`hosts.runtime.probe`) for as long as the outage lasts, which tells an
operator no more. What must not happen is silence, or one warning per fire that
nobody can tell from a transient error: this observer logs an ERROR when a locked
fire first meets a backend error, a reminder every `reminder_seconds` while the
backend stays down (how long, how many fires skipped), and a WARNING when a locked
fire gets an answer again. `down_since` and `last_error` say the same to a health
check. `monitor` asks the backend itself (`probe`), so a pager sees it too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from firefly_scheduling.fires.outcome import FireResult, Verdict

logger = logging.getLogger("firefly_scheduling.hosts")

#: How often a backend that stays down is reported again.
DEFAULT_REMINDER_SECONDS = 60.0
#: Verdicts that prove the backend answered a locked fire's claim or lock.
_ANSWERED = frozenset(
    {
        Verdict.SUCCEEDED,
        Verdict.FAILED,
        Verdict.TIMED_OUT,
        Verdict.CLAIMED_ELSEWHERE,
        Verdict.ALREADY_RECORDED,
        Verdict.OVERLAPPING,
    }
)


class BackendWatch:
    """A `FireObserver` that tracks whether the lock backend answers (see the module doc)."""

    def __init__(
        self,
        *,
        reminder_seconds: float = DEFAULT_REMINDER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reminder_seconds = reminder_seconds
        self._clock = clock
        self._mutex = threading.Lock()
        self._down_since: float | None = None
        self._reported_at = 0.0
        self._skipped = 0
        self._last_error: str | None = None

    @property
    def down_since(self) -> float | None:
        """When (by `clock`) the backend stopped answering; None while it answers."""
        return self._down_since

    @property
    def last_error(self) -> str | None:
        """The error of the latest fire the backend failed, while it is down."""
        return self._last_error

    def fire_finished(self, result: FireResult) -> None:
        if result.fire.task.lock_name is None:
            return  # an unlocked fire asks the backend nothing
        with self._mutex:
            if result.verdict is Verdict.BACKEND_ERROR:
                self._failed(result.error or "no detail")
            elif result.verdict in _ANSWERED and self._down_since is not None:
                self._answered()

    def _failed(self, error: str) -> None:
        now = self._clock()
        self._skipped += 1
        self._last_error = error
        if self._down_since is None:
            self._down_since = self._reported_at = now
            logger.error(
                "the lock backend stopped answering: fires are skipped, never run "
                "unlocked, until it answers again (%s)",
                error,
            )
        elif now - self._reported_at >= self._reminder_seconds:
            self._reported_at = now
            logger.error(
                "the lock backend has not answered for %.0f s: %d fire(s) skipped so far (%s)",
                now - self._down_since,
                self._skipped,
                error,
            )

    def _answered(self) -> None:
        down_since = self._down_since if self._down_since is not None else self._clock()
        logger.warning(
            "the lock backend answers again after %.0f s; %d fire(s) skipped meanwhile",
            self._clock() - down_since,
            self._skipped,
        )
        self._down_since = None
        self._skipped = 0
        self._last_error = None
