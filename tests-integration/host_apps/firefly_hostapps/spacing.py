"""Interval tasks on one node: a fixed_delay one and a slow fixed_rate one."""

from __future__ import annotations

import time

from firefly_hostapps.record import timed_run
from firefly_scheduling import scheduled


@scheduled(fixed_delay="0.5s", lock=True)
def delayed() -> None:
    """Body 0.3 s, delay 0.5 s: starts 0.8 s apart, end to start 0.5 s."""
    timed_run(lambda: time.sleep(0.3), "FIREFLY_HOSTAPP_DELAY_LOG")


@scheduled(fixed_rate="0.3s", lock=True)
def slow() -> None:
    """Body 1 s, rate 0.3 s: runs must skip fires rather than overlap."""
    timed_run(lambda: time.sleep(1.0), "FIREFLY_HOSTAPP_RATE_LOG")
