"""What the record of a run's end says: its stored state, its text, and the retry.

The record stage (`fires.recording`) asks the policy after a body, then writes what
`written_end` makes of the answer: the state a verdict closes a record with
(`closing_state`), `caught_up` for a catch-up fire that succeeded
(`fires.catching_up`), the text that says which retry the run was and what comes
next (`fires.retries`), and the retry `Fire` the host is handed (`fires.after_body`).
Pure: no I/O, so the record stage's writes and this wording are read apart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from firefly_scheduling.fires.after_body import NO_RETRY, AfterRun, after_run
from firefly_scheduling.fires.catching_up import caught_up_state
from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.policy import RUN, BodyEnded, Run, RunAgain, Skip
from firefly_scheduling.fires.retries import record_text
from firefly_scheduling.history.port import RunRecord, RunState

logger = logging.getLogger("firefly_scheduling.fires")

#: The stored state a started run's record is closed with, by the verdict that ends it.
_CLOSING_STATES = {
    Verdict.SUCCEEDED: RunState.SUCCEEDED,
    Verdict.FAILED: RunState.FAILED,
    Verdict.TIMED_OUT: RunState.TIMED_OUT,
    Verdict.CANCELLED: RunState.CANCELLED,
    Verdict.EXPIRED: RunState.EXPIRED,
    # Started, then found without its lock before the body: closed, never run.
    Verdict.LOCK_LOST: RunState.EXPIRED,
}


def closing_state(verdict: Verdict) -> RunState:
    """The `RunState` a started run's record is closed with when it ends as `verdict`.

    A verdict reached before any record was started is written with
    `RunHistory.skip` instead (stored as `skipped`, the reason as text); only the six
    verdicts that can end a started run close one.
    """
    try:
        return _CLOSING_STATES[verdict]
    except KeyError:
        raise ValueError(f"the verdict {verdict.name} never closes a started run") from None


@dataclass(frozen=True, slots=True)
class WrittenEnd:
    """A run's end as the history gets it: `ended` with its record's text, the state
    and text to store, and the retry that follows (`NO_RETRY`: none)."""

    ended: BodyEnded
    state: RunState
    text: str | None
    retry: AfterRun


def written_end(fire: Fire, ended: BodyEnded, answer: Run | RunAgain | Skip) -> WrittenEnd:
    """What the record of `fire`'s run says, given the policy's `answer` after it."""
    retry = NO_RETRY if answer is RUN and fire.retry is None else after_run(fire, ended, answer)
    if retry is not NO_RETRY or fire.retry is not None:  # the common fire: no new text
        ended = replace(ended, error=record_text(fire.retry, ended.error, retry.next_step))
    late = (ended.started_at - fire.due).total_seconds()
    state, text = caught_up_state(fire, closing_state(ended.verdict), ended.error, late)
    return WrittenEnd(ended, state, text, retry)


def committed(fire: Fire, ended: BodyEnded) -> BodyEnded:
    """The end of a run whose success committed in the task's transaction: succeeded.

    The record says so, and the fire is done; a body that raised after its block
    (logged already) does not make it a failed fire, to retry or count as one.
    """
    if ended.verdict is Verdict.SUCCEEDED:
        return ended
    logger.warning(
        "%s: fire %s: the body ended %s after its outcome committed in its transaction; "
        "the fire stands succeeded",
        fire.target,
        fire.instant.isoformat(),
        ended.verdict.value,
    )
    return replace(ended, verdict=Verdict.SUCCEEDED, error=None)


def committed_here(record: RunRecord | None, ended: BodyEnded) -> bool:
    """Whether `record` is the success this run's `atomic` block wrote, committed.

    Succeeded under this run's attempt and token: `record_run` would write nothing
    over it (`Recorded.ALREADY`), so the record stage need not send it. Anything
    else (still `running`, a newer attempt's) goes to `record_run`, which decides.
    """
    return (
        record is not None
        and record.state is RunState.SUCCEEDED
        and record.attempt == ended.attempt
        and record.token == ended.token
    )
