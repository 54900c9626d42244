"""A locked task that several nodes race for; its body takes 50-150 ms."""

from __future__ import annotations

import os
import random
import time

from firefly_hostapps.record import seconds, timed_run
from firefly_scheduling import scheduled


@scheduled(
    fixed_rate=seconds("FIREFLY_HOSTAPP_RATE", 0.5),
    lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-race"),
    lock_ttl="30s",
)
def race() -> None:
    timed_run(lambda: time.sleep(random.uniform(0.05, 0.15)))
