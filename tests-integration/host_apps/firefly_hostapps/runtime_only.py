"""An app with no `@scheduled` task: a `@schedulable` callable only, run on runtime schedules.

Its body appends a line as `runtime_jobs` does (`FIREFLY_HOSTAPP_LOG`).
"""

from __future__ import annotations

from firefly_hostapps.runtime_jobs import stamp
from firefly_scheduling import schedulable


@schedulable
def only() -> None:
    stamp("FIREFLY_HOSTAPP_LOG")
