"""The default policy's retry decision after a body: the next retry, its skip, or none.

See `fires.retries` for the semantics. `next_retry` is a pure function of the fire,
how its body ended and the task's schedule and `overlap=`; `DefaultPolicy.after_body` turns it into
its answer.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from firefly_scheduling.fires.outcome import Fire, Verdict
from firefly_scheduling.fires.retries import RetryOf, RetrySkipped
from firefly_scheduling.history.port import RunRecord, RunState
from firefly_scheduling.schedule.fire_instants import rate_fire_after, rate_step
from firefly_scheduling.schedule.next_fire import cron_schedule_of
from firefly_scheduling.schedule.retry_backoff import retry_delay
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor
from firefly_scheduling.tasks.overlap import Overlap
from firefly_scheduling.tasks.retry_arguments import retry_settings

#: How a body ends that a retry runs again.
RETRIED_VERDICTS = frozenset({Verdict.FAILED, Verdict.TIMED_OUT})
#: The `overlap=` policies under which a retry due at or after the task's next fire is
#: skipped, the next fire taking over. `skip` runs one fire at a time and drops the
#: later one, here the retry. `cancel_other` lets the newest fire win: a retry of an
#: older fire that then asked the next fire's run to stop would undo that.
OVERLAP_TAKES_OVER = frozenset({Overlap.SKIP, Overlap.CANCEL_OTHER})


def next_retry(
    fire: Fire, verdict: Verdict, *, attempt: int, ended_at: datetime
) -> RetryOf | RetrySkipped | None:
    """The next retry of `fire`, whose run (attempt `attempt`) ended as `verdict` at
    `ended_at`; `RetrySkipped` when it would be due at or after the task's next fire
    and the task's `overlap=` lets that fire take over (`OVERLAP_TAKES_OVER`); None
    when no retry is due (a success, the last retry, a task without retries).

    Under the other policies a late retry is asked for all the same: it meets the next
    fire's run at the task lock, where the policy's `when_held` answer applies to it as
    to any fire (it waits its turn, or runs alongside).

    The retry after attempt `a` is retry `a` (attempt `a + 1`): every attempt at the
    fire counts, an adopted run's too, so the retry and its due time follow from the
    fire's record alone (its attempt and its end), on any node (`pending_retry`).
    """
    settings = retry_settings(fire.task)
    if settings is None or verdict not in RETRIED_VERDICTS or attempt > settings.retries:
        return None
    due = ended_at + retry_delay(
        fire.target,
        fire.instant,
        attempt,
        backoff=settings.backoff,
        backoff_max=settings.backoff_max,
    )
    retry = RetryOf(attempt, settings.retries, due, attempt)
    overlap = Overlap(fire.task.overlap or Overlap.SKIP)
    if overlap not in OVERLAP_TAKES_OVER:
        return retry
    following = next_fire_due(fire, ended_at)
    if following is not None and due >= following:
        return RetrySkipped(
            retry,
            f"{retry} skipped: due {_iso(due)}, not before the task's next fire at "
            f"{_iso(following)} (overlap={overlap.value!r}: the next fire takes over)",
        )
    return retry


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


#: The verdict a failed record's state stands for.
_VERDICT_OF = {RunState.FAILED: Verdict.FAILED, RunState.TIMED_OUT: Verdict.TIMED_OUT}


def pending_retry(task: ScheduledDescriptor, record: RunRecord) -> RetryOf | None:
    """The retry a failed or timed-out `record` of `task` asks for, as the node that
    ran it computed it; None when it asks for none (or would be skipped)."""
    verdict = _VERDICT_OF.get(record.state)
    if verdict is None or record.ended_at is None:
        return None
    retry = next_retry(
        Fire.at(task, record.instant), verdict, attempt=record.attempt, ended_at=record.ended_at
    )
    return retry if isinstance(retry, RetryOf) else None


def _iso(instant: datetime) -> str:
    return instant.isoformat(timespec="milliseconds")
