"""One locked task a minute, recording each run: a tick that boots ends within the minute."""

from __future__ import annotations

from firefly_hostapps.record import timed_run
from firefly_scheduling import scheduled


@scheduled(cron="* * * * *", lock=True)
def minutely() -> None:
    timed_run(lambda: None)
