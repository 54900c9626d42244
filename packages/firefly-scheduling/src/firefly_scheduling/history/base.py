"""`BaseRunHistory`: the part of every run-history store that is no store's own.

The two writes the fire runner races on, `start` and `finish`, take the same
arguments on every store, to normalise the same way (aware UTC instants, an error
clipped to `MAX_ERROR_LENGTH`), and `finish` has a precondition (it writes a
finished state, never `running` or `skipped`). They are written here once; a store
implements each as one atomic write (`_start`, `_finish`), and the rest of the port
(`history.port.RunHistory`) as its own round trips.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from firefly_scheduling.history.port import FINISHED_STATES, RunState, clip_error
from firefly_scheduling.instants import as_utc


@dataclass(frozen=True)
class RunStart:
    """One `start` call, normalised: instants aware UTC."""

    lock: str
    task: str
    instant: datetime
    node: str
    token: int | None
    at: datetime


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
    """Shared implementation of `RunHistory.start` and `.finish`; subclasses supply the writes."""

    def start(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        token: int | None,
        at: datetime,
    ) -> int | None:
        """Record the fire as running on `node`; its attempt number, or None if refused."""
        return self._start(RunStart(lock, task, as_utc(instant), node, token, as_utc(at)))

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

    def skip_many(
        self,
        task: str,
        instants: Sequence[datetime],
        *,
        lock: str,
        node: str,
        reason: str,
        at: datetime,
    ) -> int:
        """`skip` for each of `instants`, one call each; how many were new.

        A store with a multi-row insert overrides it: a node back from an outage
        records up to `hosts.jobs.MAX_PASSED_OVER_RECORDED` fires here at once.
        """
        return sum(
            self.skip(task, instant, lock=lock, node=node, reason=reason, at=at)
            for instant in instants
        )

    @abstractmethod
    def skip(
        self, task: str, instant: datetime, *, lock: str, node: str, reason: str, at: datetime
    ) -> bool:
        """Record that nobody ran this fire, unless something is recorded already."""

    @abstractmethod
    def _start(self, begin: RunStart) -> int | None:
        """One atomic write: insert the running record of `begin`'s fire, or take over a
        `skipped` one or a `running` one with an older token (see `history.port`)."""

    @abstractmethod
    def _finish(self, end: RunEnd) -> bool:
        """One atomic write: close `end`'s fire as `end.state` if its record is `running`
        and its token is not newer than `end.token` (see `history.port`); whether it did."""
