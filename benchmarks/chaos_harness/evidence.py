"""The evidence log: one JSON object per line, each stamped with `time.monotonic_ns()`.

Every process of a run (the harness, every node, every task body) appends to the
same file. CLOCK_MONOTONIC is one clock for every process on the machine, so the
stamps order events across processes without trusting any node's wall clock (the
nemesis skews those on purpose). Each event is one `write` on a file opened with
O_APPEND, so lines of concurrent writers never interleave.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

Event = dict[str, Any]


class EvidenceLog:
    """Appends events to one file; thread-safe, shared by the threads of a process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._mutex = threading.Lock()

    def append(self, event: str, /, **fields: Any) -> int:
        """Write one `event` (its type) with `fields`; return its monotonic stamp (ns)."""
        stamp = time.monotonic_ns()
        line = json.dumps({"ev": event, "t": stamp, "pid": os.getpid(), **fields}) + "\n"
        with self._mutex:
            os.write(self._fd, line.encode())
        return stamp

    def close(self) -> None:
        os.close(self._fd)


def read_events(path: Path) -> list[Event]:
    """Every complete event of the log, in order of stamp (a torn last line is dropped)."""
    events: list[Event] = []
    if not path.exists():
        return events
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the last line of a process killed mid-write
    events.sort(key=lambda event: int(event["t"]))
    return events
