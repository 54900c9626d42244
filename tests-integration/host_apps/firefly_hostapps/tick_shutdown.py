"""A locked task due every second under `tick`, with a long body, for the tick SIGTERM tests.

Every second is a slot of the tick's minute, so a stop request finds the process
either running the body or sleeping until the next slot. The body touches
`FIREFLY_HOSTAPP_STARTED` when it begins, so the test knows when to send SIGTERM.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from firefly_hostapps.record import seconds, timed_run
from firefly_scheduling import scheduled


@scheduled(
    fixed_rate="1s",
    lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-tick-shutdown"),
    lock_ttl="60s",
)
def every_second() -> None:
    def body() -> None:
        Path(os.environ["FIREFLY_HOSTAPP_STARTED"]).touch()
        time.sleep(seconds("FIREFLY_HOSTAPP_BODY", 3.0))

    timed_run(body)
