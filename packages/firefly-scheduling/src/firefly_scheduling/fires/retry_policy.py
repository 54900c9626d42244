"""The default policy's answer after a body (run the fire again, or let the run stand),
and what the record stage makes of any policy's answer there.

See `fires.retries` for the semantics. `retry_answer` is the decision, a pure
function of the fire, how its body ended and the task's schedule; `after_run` turns
an answer into the retry `Fire` the host runs and the record's text.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from firefly_scheduling.fires.outcome import Fire, TriggerKind, Verdict
from firefly_scheduling.fires.policy import RUN, BodyEnded, Run, RunAgain, Skip
from firefly_scheduling.fires.retries import RetryOf, due_text
from firefly_scheduling.schedule.fire_instants import rate_fire_after, rate_step
from firefly_scheduling.schedule.next_fire import cron_schedule_of
from firefly_scheduling.schedule.retry_backoff import retry_delay
from firefly_scheduling.tasks.retry_arguments import retry_settings

logger = logging.getLogger("firefly_scheduling.fires")

#: How a body ends that a retry runs again.
RETRIED_VERDICTS = frozenset({Verdict.FAILED, Verdict.TIMED_OUT})


def retry_answer(fire: Fire, facts: BodyEnded) -> Run | RunAgain | Skip:
    """`RunAgain` for the next retry of a failed `fire`, `Skip` when that retry would be
    due at or after the task's next fire, `Run` when no retry is due."""
    settings = retry_settings(fire.task)
    if settings is None or facts.verdict not in RETRIED_VERDICTS:
        return RUN
    done = 0 if fire.retry is None else fire.retry.number
    if done >= settings.retries:
        return RUN
    number = done + 1
    due = facts.ended_at + retry_delay(
        fire.target,
        fire.instant,
        number,
        backoff=settings.backoff,
        backoff_max=settings.backoff_max,
    )
    retry = RetryOf(number, settings.retries, due, facts.attempt)
    following = next_fire_due(fire, facts.ended_at)
    if following is not None and due >= following:
        return Skip(
            Verdict.OVERLAPPING,
            f"{retry} skipped: due {_iso(due)}, not before the task's next fire at "
            f"{_iso(following)} (overlap='skip': the next fire takes over)",
        )
    return RunAgain(retry)


def next_fire_due(fire: Fire, ended_at: datetime) -> datetime | None:
    """When the task's next fire after `fire` may start (its jitter included).

    A cron or `fixed_rate` task's next instant after the fire's; a `fixed_delay`
    task's next run is due its delay after this run's end.
    """
    task = fire.task
    if task.cron is not None:
        following = cron_schedule_of(task).next_after(fire.instant)
    elif task.fixed_rate is not None:
        following = rate_fire_after(rate_step(task.fixed_rate), fire.instant)
    elif task.fixed_delay is not None:
        return ended_at + timedelta(seconds=task.fixed_delay)
    else:
        return None
    return Fire.at(task, following).due


def _iso(instant: datetime) -> str:
    return instant.isoformat(timespec="milliseconds")


@dataclass(frozen=True, slots=True)
class AfterRun:
    """What the policy's answer after a body means for the record and the host: the
    retry to run (None: none), and what the run's record says comes next."""

    fire: Fire | None
    next_step: str | None


def after_run(fire: Fire, ended: BodyEnded, answer: Run | RunAgain | Skip) -> AfterRun:
    """The retry `answer` asks for, made once here as a `Fire` for the host, and the
    text that goes into the record of the run that ended."""
    if isinstance(answer, RunAgain):
        retry = answer.retry
        again = Fire(fire.task, fire.instant, TriggerKind.RETRY, retry)
        logger.warning(
            "%s: fire %s failed (attempt %d); %s is due at %s",
            fire.target,
            fire.instant.isoformat(),
            ended.attempt,
            retry,
            retry.due.isoformat(),
        )
        return AfterRun(again, due_text(retry))
    if isinstance(answer, Skip):
        logger.warning("%s: fire %s: %s", fire.target, fire.instant.isoformat(), answer.reason)
        return AfterRun(None, answer.reason)
    return AfterRun(None, None)
