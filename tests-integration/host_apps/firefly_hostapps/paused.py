"""A locked task an operator pauses: each body appends `node instant started` to a log.

`instant` is the fire's scheduled instant and `started` the kernel's CLOCK_REALTIME
when the body began (both epoch seconds), one `O_APPEND` write per body, so the test
reads what started, and for which fire, from outside the node.
"""

from __future__ import annotations

import os
import time

from firefly_hostapps.record import node, seconds
from firefly_scheduling import current_fire, scheduled


@scheduled(
    fixed_rate=seconds("FIREFLY_HOSTAPP_RATE", 0.5),
    lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-paused"),
    lock_ttl="30s",
)
def paused_task() -> None:
    started = time.clock_gettime(time.CLOCK_REALTIME)
    fire = current_fire()
    assert fire is not None  # a host runs the body inside its fire's context
    instant = fire.instant.timestamp()
    line = f"{node()} {instant:.6f} {started:.6f}\n".encode()
    fd = os.open(os.environ["FIREFLY_HOSTAPP_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
