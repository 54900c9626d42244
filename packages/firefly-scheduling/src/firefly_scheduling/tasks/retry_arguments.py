"""`retries=`, `retry_backoff=` and `retry_backoff_max=`: their checks and their values.

A task holds them as given (`ScheduledDescriptor`: None where not given), so that a
backoff given without `retries=` can be refused rather than silently unused. What a
fire acts on is `RetrySettings`, the three with their defaults filled in; None for a
task without retries (or with `retries=0`).
"""

from __future__ import annotations

from dataclasses import dataclass

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.schedule.durations import readable_duration
from firefly_scheduling.schedule.retry_backoff import (
    DEFAULT_RETRY_BACKOFF_MAX_SECONDS,
    DEFAULT_RETRY_BACKOFF_SECONDS,
)
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

#: The most retries a task may ask for: a typo (`retries=1000`) is refused, not obeyed.
MAX_RETRIES = 100


@dataclass(frozen=True, slots=True)
class RetrySettings:
    """A task's retries with defaults filled in: at most `retries` retries of a failed
    fire, retry `k` due a delay in `[0, min(backoff_max, backoff * 2**(k-1)))` after
    the failed run's end (`schedule.retry_backoff`)."""

    retries: int
    backoff: float
    backoff_max: float


def retry_settings(task: ScheduledDescriptor) -> RetrySettings | None:
    """The retries `task` asks for; None when it asks for none."""
    if not task.retries:
        return None
    return RetrySettings(
        task.retries,
        DEFAULT_RETRY_BACKOFF_SECONDS if task.retry_backoff is None else task.retry_backoff,
        DEFAULT_RETRY_BACKOFF_MAX_SECONDS
        if task.retry_backoff_max is None
        else task.retry_backoff_max,
    )


def check_retry_arguments(descriptor: ScheduledDescriptor, target: str) -> None:
    """Refuse a bad `retries=` or backoff, naming the task and the value.

    The backoffs themselves are checked as durations with the other duration fields.
    """
    retries: object = descriptor.retries
    if retries is not None:
        if isinstance(retries, bool) or not isinstance(retries, int):
            raise ConfigurationError(
                f"{target}: retries={descriptor.retries!r} is not a whole number; give the "
                "number of times a failed fire is run again, such as retries=3"
            )
        if not 0 <= retries <= MAX_RETRIES:
            raise ConfigurationError(
                f"{target}: retries={retries!r} is out of range; give 0 to {MAX_RETRIES}"
            )
    backoffs = [
        name for name in ("retry_backoff", "retry_backoff_max") if getattr(descriptor, name)
    ]
    if retries is None and backoffs:
        raise ConfigurationError(
            f"{target}: {', '.join(f'{name}=' for name in backoffs)} given without retries=; "
            "a backoff only spaces retries: add retries=N or drop it"
        )
    backoff = descriptor.retry_backoff or DEFAULT_RETRY_BACKOFF_SECONDS
    backoff_max = descriptor.retry_backoff_max or DEFAULT_RETRY_BACKOFF_MAX_SECONDS
    if backoff > backoff_max:
        raise ConfigurationError(
            f"{target}: retry_backoff={readable_duration(backoff)} is longer than "
            "retry_backoff_max="
            f"{readable_duration(backoff_max)}"
            f"{'' if descriptor.retry_backoff_max is not None else ' (its default)'}; "
            "give a backoff no longer than its maximum"
        )


def retry_json(task: ScheduledDescriptor) -> dict[str, object]:
    """`retries`, `retry_backoff`, `retry_backoff_max` as `schedule --json` lists them:
    the backoffs with their defaults filled in, all null for a task without `retries=`."""
    settings = retry_settings(task)
    return {
        "retries": task.retries,
        "retry_backoff": None if settings is None else settings.backoff,
        "retry_backoff_max": None if settings is None else settings.backoff_max,
    }
