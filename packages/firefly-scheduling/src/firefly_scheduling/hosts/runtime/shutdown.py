"""Stopping a host on SIGTERM/SIGINT, shared by `run` and `tick`.

The rules: no new fire starts, running bodies get a grace period to finish and
release their locks through the fire runner, then the process exits 0. A body still
running when the grace period ends is abandoned: an error names it, and the process
exits 0 at once without waiting for its thread (`exit_abandoning`), WITHOUT releasing
its task lock or closing the lock backend first. Releasing it while the body still
runs would let another node start the task beside it; the exit ends the body, and
then its session (PostgreSQL, MySQL) goes with the process, or its lease runs out by
its TTL. A second signal ends the grace period at once.

The signal handler only counts the signal and writes a byte to a pipe. Taking a
lock inside a handler can deadlock: the handler runs in the main thread, between two
bytecodes, possibly while that same thread holds the lock (an `Event`'s condition,
the logging lock). So the main thread waits on the pipe (`StopRequest.wait`), woken
by the request and by nothing else, and does the logging and the locking itself.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from types import FrameType
from typing import NoReturn

from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.hosts.runtime.task_runtime import TaskRuntime

logger = logging.getLogger("firefly_scheduling.hosts")

DEFAULT_GRACE_PERIOD_SECONDS = 25.0
#: How often a draining host looks whether its running bodies ended.
POLL_SECONDS = 0.1
#: The longest a waiting main thread sleeps without looking at the stop request.
WAKE_SECONDS = 1.0
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Counts requests to stop: the first stops new fires, a second ends the grace period.

    `request()` is safe from a signal handler and from any thread: it increments an
    integer and calls the listeners, which must not take a lock either (a clock's
    `interrupt`, say).
    """

    def __init__(self) -> None:
        self._count = 0
        self._listeners: list[Callable[[], None]] = []
        self.signal_name: str | None = None
        #: Written on each request, read by `wait`: a waiting thread sleeps until then.
        self._wake_read, self._wake_write = os.pipe()
        for end in (self._wake_read, self._wake_write):
            os.set_blocking(end, False)
        weakref.finalize(self, _close_all, self._wake_read, self._wake_write)

    def request(self, signal_name: str | None = None) -> None:
        if signal_name is not None:
            self.signal_name = signal_name
        self._count += 1
        for listener in self._listeners:
            listener()
        with suppress(BlockingIOError):  # the pipe is full of earlier requests: awake
            os.write(self._wake_write, b"!")

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call `listener()` on every request (at once if one already came)."""
        self._listeners.append(listener)
        if self.requested:
            listener()

    @property
    def requested(self) -> bool:
        return self._count > 0

    @property
    def hurried(self) -> bool:
        """A second request came: stop waiting for running bodies."""
        return self._count > 1

    def wait(self, timeout: float) -> bool:
        """Sleep until a stop is requested or `timeout` seconds passed; whether it was.

        A signal wakes it: the interpreter writes the signal's number to the pipe
        (`stop_on_signals`), and the handler's request writes too. `WAKE_SECONDS`
        bounds each sleep all the same.
        """
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self.requested:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            readable, _, _ = select.select([self._wake_read], [], [], min(remaining, WAKE_SECONDS))
            if readable:
                _drain(self._wake_read)  # a signal's byte; its handler runs before the test
        return True

    @property
    def wake_fd(self) -> int:
        """The pipe end `stop_on_signals` gives to `signal.set_wakeup_fd`: a signal
        the kernel delivers to another thread wakes the main thread's `wait` too."""
        return self._wake_write


@contextmanager
def stop_on_signals(stop: StopRequest) -> Iterator[StopRequest]:
    """SIGTERM and SIGINT request `stop` while the block runs (main thread only).

    The previous handlers come back on the way out. A process that is about to
    exit after a graceful stop calls `ignore_stop_signals()` then.
    """

    def on_signal(signum: int, frame: FrameType | None) -> None:
        del frame
        stop.request(signal.Signals(signum).name)

    previous = {signum: signal.signal(signum, on_signal) for signum in _SIGNALS}
    previous_fd = signal.set_wakeup_fd(stop.wake_fd, warn_on_full_buffer=False)
    try:
        yield stop
    finally:
        signal.set_wakeup_fd(previous_fd)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def ignore_stop_signals() -> None:
    """Ignore SIGTERM/SIGINT from now on: the host has stopped and the process exits.

    A late extra signal must not kill the interpreter as it exits (finalisation
    restores the default handlers) and turn exit 0 into -15.
    """
    for signum in _SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def log_stop_request(stop: StopRequest) -> None:
    """Say in the log why the host stops (from the main thread, not the handler)."""
    logger.info("received %s: no new fire starts", stop.signal_name or "a stop request")


def drain(runtime: TaskRuntime, grace_period: float, stop: StopRequest) -> list[object]:
    """Stop new fires, wait up to `grace_period` for those in flight; return the abandoned.

    The task locks of abandoned fires stay held: the caller exits the process.
    """
    runtime.stop_accepting()
    running = runtime.in_flight()
    if running:
        logger.info("stopping: waiting up to %.1f s for %s", grace_period, describe_fires(running))
    deadline = time.monotonic() + max(grace_period, 0.0)
    while True:
        remaining = deadline - time.monotonic()
        if runtime.wait_idle(min(POLL_SECONDS, max(remaining, 0.0))):
            return []
        if remaining <= 0 or stop.hurried:
            break
    abandoned = runtime.in_flight()
    logger.error(
        "stopping: the grace period of %.1f s ended with %s still running; exiting "
        "without them (their locks end with the process or by their TTL)",
        grace_period,
        describe_fires(abandoned),
    )
    return abandoned


def exit_abandoning(status: int = 0) -> NoReturn:
    """Exit now with `status`, leaving abandoned bodies' threads behind.

    A thread pool's worker threads would keep the interpreter alive until their
    bodies end; the host's decision was not to wait for them.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _drain(fd: int) -> None:
    with suppress(BlockingIOError):
        while os.read(fd, 512):
            pass


def _close_all(*fds: int) -> None:
    for fd in fds:
        os.close(fd)


def describe_fires(fires: Sequence[object]) -> str:
    return ", ".join(_describe(fire) for fire in fires)


def _describe(fire: object) -> str:
    if isinstance(fire, Fire):
        return f"{fire.target} (fire of {fire.instant.isoformat(timespec='milliseconds')})"
    return repr(fire)
