"""One locked task every half second, recording each run: for the boot wait and the watch."""

from __future__ import annotations

from firefly_hostapps.record import timed_run
from firefly_scheduling import scheduled


@scheduled(fixed_rate="0.5s", lock=True)
def beat() -> None:
    timed_run(lambda: None)
