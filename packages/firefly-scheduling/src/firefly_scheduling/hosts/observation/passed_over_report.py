"""One warning now and then for the fires a node passes over, not one per job and fire.

APScheduler logs a warning each time it drops a due run because the job's previous
run still goes ("Execution of job ... skipped: maximum number of running instances
reached"). On a node that has fallen behind that is one line per task and per
period: 200 one-second tasks made 200 lines a second, and formatting them (each
renders the job's trigger and next run time) took a quarter of the node's CPU, which
made it fall further behind (found with py-spy on `benchmarks/fire_cost.py`).

So a host that owns its scheduler gives it `scheduler_logger()`, APScheduler's own
logger behind an adapter that drops that one line before a record is made. What the
line said is then said by the jobs themselves, which know it anyway (they record each
passed-over instant in the run history): a `PassedOverReport` counts the instants
and logs one warning at once, then at most one per `PASSED_OVER_REPORT_SECONDS`,
with the counts since the last.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("firefly_scheduling.hosts")

#: At most one passed-over warning per this many seconds (the first is logged at once).
PASSED_OVER_REPORT_SECONDS = 60.0
_MAX_INSTANCES_MESSAGE = "maximum number of running instances reached"


class SchedulerLog(logging.LoggerAdapter[logging.Logger]):
    """APScheduler's scheduler logger, less its per-job "maximum number of running
    instances" warning.

    The line is dropped before a log record is made: even a filter would have
    APScheduler's logging find its caller and build a record 200 times a second on a
    node that has fallen behind (6 % of its CPU samples). Every other line goes to
    `apscheduler.scheduler` as before, its level and handlers applying.
    """

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        if isinstance(msg, str) and _MAX_INSTANCES_MESSAGE in msg:
            return
        kwargs.setdefault("stacklevel", 2)
        super().warning(msg, *args, **kwargs)


def scheduler_logger() -> SchedulerLog:
    """The logger for a scheduler a firefly host owns (its `logger` option)."""
    return SchedulerLog(logging.getLogger("apscheduler.scheduler"))


class PassedOverReport:
    """Counts the fires a node's jobs passed over and says so, throttled. Thread-safe."""

    def __init__(
        self,
        interval: float = PASSED_OVER_REPORT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = interval
        self._clock = clock
        self._mutex = threading.Lock()
        self._fires = 0
        self._tasks: set[str] = set()
        self._last_logged: float | None = None

    def add(self, target: str, fires: int) -> None:
        """Count `fires` instants of `target` passed over; log when the interval is up."""
        now = self._clock()
        with self._mutex:
            self._fires += fires
            self._tasks.add(target)
            last = self._last_logged
            if last is not None and now - last < self._interval:
                return
            fires, tasks = self._fires, len(self._tasks)
            self._fires, self._tasks, self._last_logged = 0, set(), now
        window = "" if last is None else f" in the last {now - last:.0f} s"
        logger.warning(
            "%d fire(s) of %d task(s) passed over on this node%s: a run still went when "
            "the next was due, or the node was late and ran the newest due fire instead; "
            "each is recorded as skipped where a run history is kept (a node that keeps "
            "falling behind needs fewer tasks or more CPU)",
            fires,
            tasks,
            window,
        )
