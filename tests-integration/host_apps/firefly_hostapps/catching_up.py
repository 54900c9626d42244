"""One locked task a minute with `catchup=`, its body appending `node trigger instant` to a file.

The window, the limit, the lock name and how long a body lasts come from the
environment, so each test runs its own fleet's task; the body's line is the witness
of each run.
"""

from __future__ import annotations

import os
import time

from firefly_hostapps.record import append_line, node
from firefly_scheduling import current_fire, scheduled


@scheduled(
    fixed_rate="1m",
    lock=os.environ["FIREFLY_HOSTAPP_LOCK"],
    catchup=os.environ["FIREFLY_HOSTAPP_CATCHUP"],
    catchup_limit=int(os.environ["FIREFLY_HOSTAPP_CATCHUP_LIMIT"]),
)
def every_minute() -> None:
    fire = current_fire()
    assert fire is not None
    trigger = "catch-up" if fire.caught_up else "scheduled"
    time.sleep(float(os.environ.get("FIREFLY_HOSTAPP_BODY_SECONDS", "0")))
    append_line(f"{node()} {trigger} {fire.instant.isoformat()}")
