"""Boot refuses `catchup=` without a run history: the history is where missed fires are found.

A fire is missed when no node ran nor recorded it (`fires.catch_up_plan`), which only
a run history shared by the fleet can tell. Without one, catch-up would take every
instant of the window for missed and run them all again at each start: refused at
boot (exit 2), naming the task and its window.
"""

from __future__ import annotations

from collections.abc import Sequence

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.history.selection import HISTORY_KEY, OFF, history_factory
from firefly_scheduling.schedule.durations import format_duration
from firefly_scheduling.settings import Settings, env_var
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor


def check_catch_up_history(descriptors: Sequence[ScheduledDescriptor], settings: Settings) -> None:
    """`ConfigurationError` naming the first task with `catchup=` when there is no history."""
    catching_up = [d for d in descriptors if d.catchup is not None]
    if not catching_up or history_factory(settings) is not None:
        return
    first = catching_up[0]
    window = format_duration(first.catchup) if first.catchup is not None else "?"
    others = (
        f" (and {len(catching_up) - 1} more task(s) with catchup=)" if len(catching_up) > 1 else ""
    )
    why = (
        f"{env_var(HISTORY_KEY)}={OFF}"
        if settings.history_url.strip().lower() == OFF
        else "the lock backend keeps no history at its URL"
    )
    raise ConfigurationError(
        f"{first.target}: catchup={window!r} needs a run history, where the fires the "
        f"fleet missed are found, and there is none ({why}){others}; set "
        f"{env_var(HISTORY_KEY)} to a history URL, or drop catchup="
    )
