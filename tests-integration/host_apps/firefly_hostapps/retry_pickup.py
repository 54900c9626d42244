"""A locked task with `retries=` whose first attempt of a fire fails, for the test of a
retry picked up from the run history by a node that did not run the failure.

It fires once a year (never during a test): the test runs its failing first attempt
in another process, which exits without running the retry. Each run appends
`node instant attempt` to the file named by `FIREFLY_HOSTAPP_WITNESS` (`O_APPEND`).
"""

from __future__ import annotations

import os

from firefly_hostapps.record import append_line, node
from firefly_scheduling import current_fire, scheduled


@scheduled(
    cron="0 0 1 1 *",
    lock=os.environ.get("FIREFLY_HOSTAPP_LOCK", "hostapps-retry-pickup"),
    retries=2,
    retry_backoff="1s",
    retry_backoff_max="1s",
)
def picked_up() -> None:
    fire = current_fire()
    assert fire is not None
    append_line(f"{node()} {fire.instant.isoformat()} {fire.attempt}", "FIREFLY_HOSTAPP_WITNESS")
    if fire.attempt == 1:
        raise RuntimeError("the first attempt fails")
