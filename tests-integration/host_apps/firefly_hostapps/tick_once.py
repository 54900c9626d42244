"""A locked cron task due every minute, whose body outlasts the nodes' start-up spread."""

from __future__ import annotations

import os
import time

from firefly_hostapps.record import seconds, timed_run
from firefly_scheduling import scheduled


@scheduled(
    cron="* * * * *",
    lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-tick-once"),
    lock_ttl="60s",
)
def once_per_minute() -> None:
    timed_run(lambda: time.sleep(seconds("FIREFLY_HOSTAPP_BODY", 4.0)))
