"""A locked task with a long body, for the graceful-shutdown tests of both hosts.

Under `run` it is a `fixed_delay` task, so the first run starts as soon as the host
does. Under `tick` it is due every `FIREFLY_HOSTAPP_RATE` (one second): every second
is a slot of the pass's minute, so a stop request finds the process either running
the body or sleeping until the next slot. The body touches `FIREFLY_HOSTAPP_STARTED`
when it begins, so the test knows when to send SIGTERM.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from firefly_hostapps.record import seconds, timed_run
from firefly_scheduling import scheduled

_RATE = os.environ.get("FIREFLY_HOSTAPP_RATE") or None


@scheduled(
    fixed_rate=_RATE,
    fixed_delay=None if _RATE else "60s",
    lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-shutdown"),
    lock_ttl="60s",
)
def long_body() -> None:
    def body() -> None:
        Path(os.environ["FIREFLY_HOSTAPP_STARTED"]).touch()
        time.sleep(seconds("FIREFLY_HOSTAPP_BODY", 3.0))

    timed_run(body)
