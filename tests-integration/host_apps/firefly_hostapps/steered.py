"""Two locked tasks an operator steers: one that only a trigger runs, one to backfill.

Each run appends `task node instant monotonic_ns realtime_ns` to the file named by
`FIREFLY_HOSTAPP_LOG` (O_APPEND, stamped by the kernel's clocks), so a test reads
what ran, where, and when, from outside the nodes.
"""

from __future__ import annotations

import os
import time

from firefly_hostapps.record import node
from firefly_scheduling import current_fire, scheduled

LOCK = os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-steered")


def _witness(task: str) -> None:
    fire = current_fire()
    instant = "-" if fire is None else fire.instant.isoformat()
    monotonic = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    realtime = time.clock_gettime_ns(time.CLOCK_REALTIME)
    line = f"{task} {node()} {instant} {monotonic} {realtime}\n".encode()
    fd = os.open(os.environ["FIREFLY_HOSTAPP_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


# Once a year, at an instant no test reaches: only a trigger runs it.
@scheduled(cron="0 0 1 1 *", lock=f"{LOCK}-report", lock_ttl="30s")
def report() -> None:
    _witness("report")
    time.sleep(0.2)


# Every five minutes: a backfill replays a past hour of it.
@scheduled(cron="*/5 * * * *", lock=f"{LOCK}-every-five", lock_ttl="30s")
def every_five() -> None:
    _witness("every_five")


# Every minute, with a short lock TTL and a slow body: a backfill long enough to kill
# the node that drives it half-way.
@scheduled(cron="* * * * *", lock=f"{LOCK}-replayed", lock_ttl="3s")
def replayed() -> None:
    _witness("replayed")
    time.sleep(0.3)
