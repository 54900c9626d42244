"""`BaseRunHistory`: the part of every run-history store that is no store's own.

The writes the fire runner races on, `start`, `finish` and `record_run`, take the
same arguments on every store, to normalise the same way (aware UTC instants, an
error clipped to `MAX_ERROR_LENGTH`), and `finish` and `record_run` have a
precondition (they write a finished state, never `running` or `skipped`). They are
written here once; a store implements each as conditional writes (`_start`,
`_finish`, `_record_run`), and the rest of the port (`history.port.RunHistory`) as
its own round trips. The fencing rules every store applies are spelt here once too
(`takes_over`, `may_close`, `refusal`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from firefly_scheduling.history.port import (
    FINISHED_STATES,
    PLACEHOLDER_STATES,
    SCHEDULED,
    Recorded,
    RunState,
    checked_trigger,
    clip_error,
    clip_requested_by,
)
from firefly_scheduling.schedule.instants import as_utc

#: The text of a record that a run's late end wrote over its expiry (`late_end`),
#: before the run's own error, if any.
LATE_END_NOTE = (
    "ended after its record was closed expired: its task lock was lost while it ran "
    "(or prune took its node for gone); this is the end it reported"
)


@dataclass(frozen=True)
class RunStart:
    """One `start` call, normalised: instants aware UTC."""

    lock: str
    task: str
    instant: datetime
    node: str
    token: int | None
    at: datetime
    trigger: str = SCHEDULED
    requested_by: str | None = None


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


@dataclass(frozen=True)
class WholeRun:
    """One `record_run` call, checked and normalised: instants aware UTC, `error` clipped."""

    lock: str
    task: str
    instant: datetime
    node: str
    token: int | None
    state: RunState
    error: str | None
    started_at: datetime
    ended_at: datetime
    trigger: str = SCHEDULED
    requested_by: str | None = None


def takes_over(token: int | None, recorded: int | None) -> bool:
    """Whether a run with `token` is a newer attempt than the record holding `recorded`.

    `start` takes a `running` record over on it; a run without a token, or a record
    without one, cannot be ordered, and a start then takes it (adoption without
    fencing).
    """
    return recorded is None or token is None or token > recorded


def may_close(token: int | None, recorded: int | None) -> bool:
    """Whether a run with `token` may close a `running` record holding `recorded`.

    The writer is not fenced: the record has no token, or one no newer than the
    writer's. A run without a token closes only a record without one.
    """
    if recorded is None:
        return True
    return token is not None and token >= recorded


def newer_run(token: int | None, recorded: int | None) -> bool:
    """Whether a run with `token` is strictly newer than a finished record's `recorded`:
    only then does `record_run` replace a finished record."""
    return token is not None and (recorded is None or token > recorded)


def replaces_finished(recorded_state: RunState, ending: RunState) -> bool:
    """Whether a newer run that ended as `ending` may replace a finished record in
    `recorded_state`: a success only by a success. A success may have committed with
    the task's own writes (`current_fire().atomic`), and a newer run whose start the
    history never learnt of (so the success was not fenced) cannot unsay it."""
    return recorded_state is not RunState.SUCCEEDED or ending is RunState.SUCCEEDED


def late_end(state: RunState, recorded: int | None, token: int | None, ending: RunState) -> bool:
    """Whether a run with `token` that ended as `ending` writes its end over a record in
    `state` holding `recorded` as the same attempt: the record is `expired` under this
    very run's token, closed while the run still ran (its task lock lost: the task's
    next fire found it past grace, or prune found it long past its start).

    Nobody ran the fire since: a start never takes an expired record over, and any
    newer attempt written since (`record_run`) holds a newer token. So the run's real
    end is more truthful than the presumed death. A run without a token cannot show
    that the record is its own, and one that ended `expired` has nothing to add."""
    return (
        state is RunState.EXPIRED
        and ending is not RunState.EXPIRED
        and token is not None
        and recorded == token
    )


def late_end_text(error: str | None) -> str | None:
    """The text a `late_end` writes: `LATE_END_NOTE`, then the run's own `error`, clipped."""
    return clip_error(LATE_END_NOTE if error is None else f"{LATE_END_NOTE}; {error}")


def refusal(
    state: RunState, recorded: int | None, token: int | None, ending: RunState
) -> Recorded | None:
    """Why `record_run` of a run with `token` that ended as `ending` wrote nothing over
    a record in `state` holding `recorded`; None when it would write now (the record
    changed meanwhile)."""
    if state in PLACEHOLDER_STATES:
        return None
    if state is RunState.RUNNING:
        return None if may_close(token, recorded) else Recorded.FENCED
    if newer_run(token, recorded):
        return None if replaces_finished(state, ending) else Recorded.SUCCEEDED
    if late_end(state, recorded, token, ending):
        return None
    return Recorded.ALREADY if recorded == token else Recorded.FENCED


def whole_run_attempt(
    state: RunState, attempt: int, recorded: int | None, token: int | None
) -> int:
    """The attempt `record_run` writes over a record it may replace (see `history.port`)."""
    if state in PLACEHOLDER_STATES:
        return 1
    return attempt + 1 if newer_run(token, recorded) else attempt


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
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> int | None:
        """Record the fire as running on `node`; its attempt number, or None if refused."""
        begin = RunStart(
            lock,
            task,
            as_utc(instant),
            node,
            token,
            as_utc(at),
            checked_trigger(trigger),
            clip_requested_by(requested_by),
        )
        return self._start(begin)

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

    def record_run(
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        token: int | None,
        state: RunState,
        error: str | None,
        started_at: datetime,
        ended_at: datetime,
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> Recorded:
        """Write the whole record of a run that ended as `state` (see `history.port`).

        Raises `ValueError` for a state that is not a finished one.
        """
        if state not in FINISHED_STATES:
            raise ValueError(f"record_run() writes a finished state, not {state!r}")
        run = WholeRun(
            lock,
            task,
            as_utc(instant),
            node,
            token,
            state,
            clip_error(error),
            as_utc(started_at),
            as_utc(ended_at),
            checked_trigger(trigger),
            clip_requested_by(requested_by),
        )
        return self._record_run(run)

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
        self,
        task: str,
        instant: datetime,
        *,
        lock: str,
        node: str,
        reason: str,
        at: datetime,
        trigger: str = SCHEDULED,
        requested_by: str | None = None,
    ) -> bool:
        """Record that nobody ran this fire, unless something is recorded already."""

    @abstractmethod
    def _start(self, begin: RunStart) -> int | None:
        """One atomic write: insert the running record of `begin`'s fire, or take over a
        `skipped` one or a `running` one with an older token (see `history.port`)."""

    @abstractmethod
    def _record_run(self, run: WholeRun) -> Recorded:
        """Write `run`'s whole record where `history.port` allows it: insert it where
        the fire has no record, replace a skip, close a `running` record `may_close`
        allows, replace a finished one for a `newer_run`, or write a `late_end` over
        its own expiry (the text `late_end_text`); else say why not (`refusal`).
        Each write is atomic and conditional on what it replaces."""

    @abstractmethod
    def _finish(self, end: RunEnd) -> bool:
        """One atomic write: close `end`'s fire as `end.state` if its record is `running`
        and its token is not newer than `end.token` (see `history.port`); whether it did."""
