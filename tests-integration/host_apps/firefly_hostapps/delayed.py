"""A cron task due every minute, held back by an initial delay."""

from __future__ import annotations

import os

from firefly_hostapps.record import seconds, timed_run
from firefly_scheduling import scheduled


@scheduled(
    cron="* * * * *",
    initial_delay=seconds("FIREFLY_HOSTAPP_INITIAL_DELAY", 5.0),
    lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-delayed"),
)
def warm_up() -> None:
    timed_run(lambda: None)
