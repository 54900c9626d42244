"""Code run in child processes by the contract suite (importable, so `spawn` can find it)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from firefly_scheduling.locks.port import DistributedLock


def default_stop_signals() -> None:
    """A pool worker's initializer: SIGTERM and SIGINT end it, whatever its parent ignored.

    A spawned process inherits ignored signals across exec. A test process that ran a
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
