"""Append one run of a task to the shared log: `node start end` (epoch seconds)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def node() -> str:
    return os.environ.get("FIREFLY_SCHEDULING_NODE", f"pid-{os.getpid()}")


def append_line(text: str, log_variable: str = "FIREFLY_HOSTAPP_LOG") -> None:
    """Append `text` and a newline to the file named by `log_variable`, in one
    `O_APPEND` write: lines of concurrent bodies and nodes never interleave."""
    fd = os.open(os.environ[log_variable], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{text}\n".encode())
    finally:
        os.close(fd)


def timed_run(body: Callable[[], object], log_variable: str = "FIREFLY_HOSTAPP_LOG") -> None:
    """Run `body` and append `node start end` to the file named by `log_variable`."""
    start = time.time()
    try:
        body()
    finally:
        append_line(f"{node()} {start:.6f} {time.time():.6f}", log_variable)


def seconds(variable: str, default: float) -> float:
    return float(os.environ.get(variable, default))
