"""What `ScheduleControl` answers and how it names operators: one definition for both flavours.

`TaskState` and `FleetStatus` are the answer of `status` (sync and asyncio alike);
`fleet_status` builds it from the pauses the store read; `operator` and `note` check
what a caller passes, `operator` filling in `<login>@<host>` when nobody says who.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from firefly_scheduling.control.records import ALL_TASKS, Change, Pause, checked_text
from firefly_scheduling.errors import ConfigurationError


def default_operator() -> str:
    """Who changes the fleet when nobody says: `<login>@<host>`."""
    try:
        return f"{getpass.getuser()}@{socket.gethostname()}"
    except (OSError, KeyError) as err:
        raise ConfigurationError(f"cannot tell who you are ({err}): pass by=") from err


@dataclass(frozen=True)
class TaskState:
    """Whether `target` is paused, and by which pause: its own, or the fleet-wide one.

    `note`, `by` and `since` (epoch seconds, the store's clock) are those of the
    task's own pause, else of the fleet-wide one; empty and None when it runs.
    """

    target: str
    paused: bool
    note: str = ""
    by: str = ""
    since: float | None = None
    #: Whether the pause that holds the task is the fleet-wide one.
    all_tasks: bool = False


@dataclass(frozen=True)
class FleetStatus:
    """The fleet-wide pause (None: none), the state of each task asked about, paused or
    recently changed, and the newest changes read from the audit trail, newest first."""

    all_tasks: Pause | None
    tasks: tuple[TaskState, ...]
    changes: tuple[Change, ...] = ()

    def of(self, target: str) -> TaskState:
        """The state of `target` (running, unless paused by itself or the whole fleet)."""
        for state in self.tasks:
            if state.target == target:
                return state
        return _state(target, self.all_tasks, None)


def fleet_status(
    pauses: Sequence[Pause],
    names: Sequence[str] | None,
    extra: Sequence[str],
    changes: Sequence[Change] = (),
) -> FleetStatus:
    """The status of `names` (None: every task paused on its own or changed in
    `changes`, and `extra`)."""
    everything = next((pause for pause in pauses if pause.all_tasks), None)
    own = {pause.task: pause for pause in pauses if not pause.all_tasks}
    changed = {change.task for change in changes if change.task != ALL_TASKS}
    shown = sorted({*own, *extra, *changed}) if names is None else names
    return FleetStatus(
        everything, tuple(_state(n, everything, own.get(n)) for n in shown), tuple(changes)
    )


def operator(by: str | None) -> str:
    """`by` checked (non-blank, bounded), or `<login>@<host>` when None."""
    return default_operator() if by is None else checked_text(by, "by", required=True)


def note_text(note: str | None) -> str:
    """`note` checked (bounded, no NUL), or empty when None."""
    return "" if note is None else checked_text(note, "note", required=False)


def _state(target: str, everything: Pause | None, own: Pause | None) -> TaskState:
    holding = own or everything
    if holding is None:
        return TaskState(target, paused=False)
    return TaskState(
        target,
        paused=True,
        note=holding.note,
        by=holding.by,
        since=holding.since,
        all_tasks=holding.all_tasks,
    )
