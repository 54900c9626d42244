"""The resident host behind `firefly-scheduling run`: one long-lived process per node.

Hosted on APScheduler 3 (`BackgroundScheduler`) rather than a home-made loop: it is
mature and widely deployed, wakes exactly at the next due time (sub-second rates
included), runs bodies in a thread pool, and already implements per-job
`max_instances`, coalescing and misfire handling, which are exactly the no-overlap
and no-burst rules of `fixed_rate`. What it lacks (crontab day-of-week semantics,
epoch-aligned fire instants, end-to-start delays) is supplied by `jobs` and
`triggers`.

Shutdown (SIGTERM or SIGINT): no new fire starts, the scheduler stops, running
bodies get `grace_period` seconds to finish and release their locks through the
guard, then the lock backend is closed and the process exits 0. Bodies still
running after the grace period are abandoned: their locks are released (the
instance is owner-checked, so only ours), an error names them, and the process
exits 0 without waiting for their threads. A second signal ends the grace period at
once.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC
from types import FrameType

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from firefly_scheduling.descriptor import ScheduledDescriptor
from firefly_scheduling.hosts.fires import Fire
from firefly_scheduling.hosts.jobs import attach_tasks
from firefly_scheduling.hosts.runtime import TaskRuntime

logger = logging.getLogger("firefly_scheduling.hosts")

DEFAULT_GRACE_PERIOD_SECONDS = 25.0
_MAX_WORKERS = 64
# How often the main thread wakes while waiting for a signal (signal handlers run
# in the main thread between waits).
_POLL_SECONDS = 0.5


class ResidentHost:
    """Runs `descriptors` on APScheduler until asked to stop."""

    def __init__(
        self,
        descriptors: Sequence[ScheduledDescriptor],
        runtime: TaskRuntime,
        *,
        grace_period: float = DEFAULT_GRACE_PERIOD_SECONDS,
        max_workers: int | None = None,
    ) -> None:
        self.descriptors = tuple(descriptors)
        self.runtime = runtime
        self.grace_period = grace_period
        workers = max_workers or min(max(len(self.descriptors), 1), _MAX_WORKERS)
        self.scheduler = BackgroundScheduler(
            timezone=UTC, executors={"default": ThreadPoolExecutor(workers)}
        )
        self._stop = threading.Event()
        self._hurry = threading.Event()
        attach_tasks(self.scheduler, self.descriptors, runtime)

    def start(self) -> None:
        self.scheduler.start()
        logger.info(
            "resident host started on node %s with %d task(s)",
            self.runtime.node,
            len(self.descriptors),
        )

    def request_stop(self) -> None:
        """Ask the host to stop (what SIGTERM/SIGINT do); a second call skips the grace."""
        if self._stop.is_set():
            self._hurry.set()
        self._stop.set()

    def run_until_stopped(self, *, handle_signals: bool = True) -> int:
        """Start, block until SIGTERM/SIGINT (or `request_stop`), shut down; return 0."""
        if handle_signals:
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, self._on_signal)
        self.start()
        while not self._stop.wait(_POLL_SECONDS):
            pass
        status = self.shutdown()
        if handle_signals:
            # Stopped: a late extra signal must not kill the interpreter as it exits
            # (finalisation restores the default handlers) and turn 0 into -15.
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, signal.SIG_IGN)
        return status

    def shutdown(self) -> int:
        """Stop new fires, wait up to the grace period, release and close; return 0."""
        self.runtime.stop_accepting()
        self.scheduler.shutdown(wait=False)
        running = self.runtime.in_flight()
        if running:
            logger.info(
                "stopping: waiting up to %.1f s for %s",
                self.grace_period,
                ", ".join(_describe(fire) for fire in running),
            )
        finished = self._wait_for_bodies()
        if finished:
            self.runtime.close()
            logger.info("resident host stopped")
            return 0
        abandoned = self.runtime.in_flight()
        logger.error(
            "stopping: the grace period of %.1f s ended with %s still running; releasing "
            "their locks and exiting without them",
            self.grace_period,
            ", ".join(_describe(fire) for fire in abandoned),
        )
        self._release_abandoned(abandoned)
        self.runtime.close()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        # The pool's worker threads would keep the interpreter alive until the
        # abandoned bodies end; the host's decision was not to wait for them.
        os._exit(0)

    def _wait_for_bodies(self) -> bool:
        deadline = time.monotonic() + max(self.grace_period, 0.0)
        while True:
            remaining = deadline - time.monotonic()
            if self.runtime.wait_idle(min(_POLL_SECONDS, max(remaining, 0.0))):
                return True
            if remaining <= 0 or self._hurry.is_set():
                return False

    def _release_abandoned(self, fires: Sequence[object]) -> None:
        if not self.runtime.lock.built:
            return
        lock = self.runtime.lock.get()
        for fire in fires:
            if isinstance(fire, Fire) and fire.descriptor.lock_name is not None:
                lock.release(fire.descriptor.lock_name)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        del frame
        logger.info("received %s", signal.Signals(signum).name)
        self.request_stop()


def _describe(fire: object) -> str:
    if isinstance(fire, Fire):
        return f"{fire.target} (fire of {fire.instant.isoformat(timespec='milliseconds')})"
    return repr(fire)
