"""Code run in child processes by the contract suite (importable, so a child can find it)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.context import ForkServerContext

from firefly_scheduling.locks.port import DistributedLock

#: The modules whose functions the children run.
_CHILD_CODE = (
    "firefly_scheduling.testing.workers",
    "firefly_scheduling.testing.leader_workers",
    "firefly_scheduling.testing.control_workers",
)


def child_processes() -> ForkServerContext:
    """The start method of the contract's child processes: a fork server.

    Each child is forked from one clean, single-threaded server process (never from
    the test process and its threads) that has already imported the project's
    modules the test process had imported when the server started, so a child does
    not import them again as a spawned interpreter would: eight at once made most of a
    multi-process case's start. Only whole packages are preloaded (a failing import
    other than ImportError would stop the server). A child sees the environment the
    test process had when the server started (its first call); its arguments, as
    with `spawn`, are pickled.
    """
    context = multiprocessing.get_context("forkserver")
    loaded = sorted(
        name for name in sys.modules if name.startswith("firefly_scheduling_") and "." not in name
    )
    context.set_forkserver_preload([*_CHILD_CODE, *loaded])
    return context


def default_stop_signals() -> None:
    """A pool worker's initializer: SIGTERM and SIGINT end it, whatever its parent ignored.

    A child process inherits ignored signals, across exec too. A test process that ran a
    host in-process (which ignores SIGTERM/SIGINT once it has stopped) would otherwise
    hand that to the pool's workers, and `Pool.terminate()` would wait for them forever.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def exclusive_file_worker(
    factory: Callable[[], DistributedLock],
    name: str,
    witness_path: str,
    acquisitions: int,
    deadline_seconds: float,
) -> tuple[int, int]:
    """Acquire `name` `acquisitions` times; count overlaps seen through a shared file.

    While holding the lock the worker checks the witness file is empty, writes its
    pid, yields the CPU, checks its pid is still there and empties the file. Any
    other content means two processes were inside at once. Returns
    `(acquired, overlaps)`; stops at the deadline whatever happened.
    """
    lock = factory()
    me = str(os.getpid()).encode()
    acquired = overlaps = 0
    stop_at = time.monotonic() + deadline_seconds
    fd = os.open(witness_path, os.O_RDWR)
    try:
        while acquired < acquisitions and time.monotonic() < stop_at:
            if not lock.try_acquire(name, 30):
                time.sleep(0.0005)
                continue
            try:
                acquired += 1
                if os.pread(fd, 64, 0):
                    overlaps += 1
                os.pwrite(fd, me, 0)
                time.sleep(0)
                if os.pread(fd, 64, 0) != me:
                    overlaps += 1
                os.ftruncate(fd, 0)
            finally:
                lock.release(name)
    finally:
        os.close(fd)
        close = getattr(lock, "close", None)
        if callable(close):
            close()
    return acquired, overlaps
