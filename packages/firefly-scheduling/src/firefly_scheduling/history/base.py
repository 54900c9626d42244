"""`BaseRunHistory`: the part of every run-history store that is no store's own.

`finish` has a precondition (it writes a finished state, never `running` or
`skipped`) and arguments to normalise (aware UTC instants, an error clipped to
`MAX_ERROR_LENGTH`) that are the same for every store. They are written here once;
a store implements the one atomic write, `_finish`, and the rest of the port
(`history.port.RunHistory`) as its own round trips.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime

from firefly_scheduling.history.port import FINISHED_STATES, RunState, clip_error
from firefly_scheduling.instants import as_utc


@dataclass(frozen=True)
class RunEnd:
    """One `finish` call, checked and normalised: instants aware UTC, `error` clipped."""

    lock: str
    task: str
    instant: datetime
    token: int | None
    state: RunState
    error: str | None
    at: datetime


class BaseRunHistory(ABC):
    """Shared implementation of `RunHistory.finish`; subclasses supply the write."""

    def finish(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        token: int | None,
        state: RunState,
        error: str | None,
        at: datetime,
    ) -> bool:
        """Close a running record as `state`; False when refused (fenced, or not running).

        Raises `ValueError` for a state that is not a finished one: a caller's defect,
        never a store's failure.
        """
        if state not in FINISHED_STATES:
            raise ValueError(f"finish() writes a finished state, not {state!r}")
        end = RunEnd(lock, task, as_utc(instant), token, state, clip_error(error), as_utc(at))
        return self._finish(end)

    @abstractmethod
    def _finish(self, end: RunEnd) -> bool:
        """One atomic write: close `end`'s fire as `end.state` if its record is `running`
        and its token is not newer than `end.token` (see `history.port`); whether it did."""
