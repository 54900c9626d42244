"""Reading what the runtime-schedule tests' witnesses wrote, and the kernel's clocks.

A body of `firefly_hostapps.runtime_jobs` appends `node instant realtime monotonic`
per run; a node's log stamps each line with its wall clock. The tests compare both
with the kernel's clocks read at the moment a command returned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from firefly_hostapps.harness import log_fields

#: The guarantee: a runtime schedule's change reaches every node within this many seconds.
PICKUP_SECONDS = 5.0


@dataclass(frozen=True)
class Stamp:
    node: str
    instant: str
    realtime: float
    monotonic: float


def read_stamps(path: Path) -> list[Stamp]:
    return [
        Stamp(node, instant, float(realtime), float(monotonic))
        for node, instant, realtime, monotonic in log_fields(path)
    ]


def kernel_monotonic() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def kernel_realtime() -> float:
    return time.clock_gettime(time.CLOCK_REALTIME)


def logged_at(output: str, marker: str) -> float | None:
    """When a node logged the first line holding `marker` (its log's local time, to the ms)."""
    for line in output.splitlines():
        if marker in line:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            return stamp.timestamp()
    return None
