"""A locked task with a long body, for the graceful-shutdown tests.

`fixed_delay` so the first run starts as soon as the host does; the body touches
`FIREFLY_HOSTAPP_STARTED` when it begins, so the test knows when to send SIGTERM.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from firefly_hostapps.record import seconds, timed_run
from firefly_scheduling import scheduled


@scheduled(
    fixed_delay="60s",
    lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-shutdown"),
    lock_ttl="60s",
)
def long_body() -> None:
    def body() -> None:
        Path(os.environ["FIREFLY_HOSTAPP_STARTED"]).touch()
        time.sleep(seconds("FIREFLY_HOSTAPP_BODY", 3.0))

    timed_run(body)
