"""A locked task whose body outlasts its period, with the `overlap=` the test chose.

Each run appends `node instant start end asked` (epoch seconds; `asked` is 1 when a
newer fire asked it to stop, `overlap="cancel_other"`, and it stopped early) to the
shared log, so the test sees which fire ran where and when, from the bodies
themselves.
"""

from __future__ import annotations

import os
import time

from firefly_hostapps.record import append_line, node, seconds
from firefly_scheduling import current_fire, scheduled


@scheduled(
    fixed_rate=seconds("FIREFLY_HOSTAPP_RATE", 1.0),
    lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-overlapping"),
    lock_ttl="2s",
    overlap=os.environ.get("FIREFLY_HOSTAPP_OVERLAP", "skip"),
)
def overlapping() -> None:
    context = current_fire()
    assert context is not None
    start = time.time()
    until = time.monotonic() + seconds("FIREFLY_HOSTAPP_BODY", 2.5)
    while time.monotonic() < until and not context.cancel_requested:
        time.sleep(0.01)
    end = time.time()
    asked = int(context.cancel_requested)
    append_line(f"{node()} {context.instant.timestamp():.6f} {start:.6f} {end:.6f} {asked}")
