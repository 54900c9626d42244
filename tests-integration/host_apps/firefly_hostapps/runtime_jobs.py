"""Callables for runtime schedules: one `@schedulable`, one the code does not allow.

Each body appends `node fire-instant CLOCK_REALTIME CLOCK_MONOTONIC` (the kernel's
clocks, read by the body itself) to the O_APPEND file named by
`FIREFLY_HOSTAPP_LOG` (`witness`) or `FIREFLY_HOSTAPP_FORBIDDEN_LOG` (`forbidden`),
so a test reads when each fire's body started, on which node, from outside the nodes.
The hourly `@scheduled` task only gives the nodes a task of the code to boot with.
"""

from __future__ import annotations

import os
import time

from firefly_hostapps.record import node
from firefly_scheduling import current_fire, schedulable, scheduled


def stamp(variable: str) -> None:
    realtime = time.clock_gettime(time.CLOCK_REALTIME)
    monotonic = time.clock_gettime(time.CLOCK_MONOTONIC)
    fire = current_fire()
    instant = fire.instant.isoformat() if fire is not None else "-"
    line = f"{node()} {instant} {realtime:.6f} {monotonic:.6f}\n".encode()
    fd = os.open(os.environ[variable], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@schedulable
def witness() -> None:
    stamp("FIREFLY_HOSTAPP_LOG")


def forbidden() -> None:
    """Neither `@schedulable` nor `@scheduled`: no runtime schedule may run it."""
    stamp("FIREFLY_HOSTAPP_FORBIDDEN_LOG")


@scheduled(cron="0 0 1 1 *", lock=False)
def yearly() -> None:
    """Never due during a test."""
