"""Two tasks under `tick` for the exit-status tests: one fails every second, one runs long.

`runs_long` touches `FIREFLY_HOSTAPP_STARTED` as it begins, then sleeps for
`FIREFLY_HOSTAPP_BODY` seconds; `fails_fast` raises at once, every second, after
touching `FIREFLY_HOSTAPP_FAILED`. A test sends SIGTERM once both happened.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from firefly_hostapps.record import seconds
from firefly_scheduling import scheduled


@scheduled(fixed_rate="1s", lock="hostapps-tick-failing-fast")
def fails_fast() -> None:
    Path(os.environ["FIREFLY_HOSTAPP_FAILED"]).touch()
    raise RuntimeError("the report server refused the upload")


@scheduled(fixed_rate="1m", lock="hostapps-tick-failing-long", lock_ttl="2m")
def runs_long() -> None:
    Path(os.environ["FIREFLY_HOSTAPP_STARTED"]).touch()
    time.sleep(seconds("FIREFLY_HOSTAPP_BODY", 20.0))
