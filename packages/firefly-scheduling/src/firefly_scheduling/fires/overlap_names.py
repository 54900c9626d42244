"""The lock names of the overlap policies' waiting slots and queue markers.

Ordinary locks on the task's own backend, named after the task lock so that every
node names them alike (`fires.overlap_wait` says how they are used):

* `firefly:overlap-waiting:<n>:<lock>`: the `n`-th waiting slot of a task lock
  (`buffer_one` has one, `buffer_all` `BUFFER_ALL_MAX_WAITING`); a fire that waits
  holds one, so the slots bound how many fires wait, fleet-wide;
* `firefly:overlap-queue:<UTC instant>:<lock>`: held by the fire of that instant
  while it waits (`buffer_all`), so the fire scheduled after it waits for it first.

`<lock>` is the lock name itself when the whole name fits in 255 characters, and
otherwise its SHA-256 (a readable part never starts with `sha256:`).
"""

from __future__ import annotations

import functools
import hashlib
from datetime import UTC, datetime, timedelta

from firefly_scheduling.fires.outcome import Fire
from firefly_scheduling.locks.validation import MAX_LOCK_NAME_LENGTH
from firefly_scheduling.schedule.fire_instants import (
    cron_fire_at_or_before,
    rate_fire_at_or_before,
    rate_step,
)
from firefly_scheduling.schedule.next_fire import cron_schedule_of

SLOT_PREFIX = "firefly:overlap-waiting:"
MARKER_PREFIX = "firefly:overlap-queue:"
_HASHED = "sha256:"
_STAMP_FORMAT = "%Y%m%dT%H%M%S.%fZ"
_MICROSECOND = timedelta(microseconds=1)
# The longest fixed part of a name: the marker's prefix and its stamp.
_LONGEST_FIXED = len(MARKER_PREFIX) + len("20000101T000000.000000Z:")


def waiting_slots(lock_name: str, count: int) -> tuple[str, ...]:
    """The `count` waiting slots of the task lock `lock_name`, in the order they are tried."""
    part = _lock_part(lock_name)
    return tuple(f"{SLOT_PREFIX}{index}:{part}" for index in range(count))


def queue_marker(lock_name: str, instant: datetime) -> str:
    """The name the fire of `instant` holds while it waits in `lock_name`'s queue."""
    return (
        f"{MARKER_PREFIX}{instant.astimezone(UTC).strftime(_STAMP_FORMAT)}:{_lock_part(lock_name)}"
    )


def previous_instant(fire: Fire) -> datetime:
    """The instant scheduled just before `fire`'s: by its cron, or its rate on the
    epoch grid (the resident host's; see `fires.overlap_wait` for `tick`)."""
    task = fire.task
    before = fire.instant - _MICROSECOND
    if task.cron is not None:
        return cron_fire_at_or_before(cron_schedule_of(task), before)
    if task.fixed_rate is None:
        raise ValueError(f"{task.target}: only a cron or fixed_rate fire has a schedule")
    return rate_fire_at_or_before(rate_step(task.fixed_rate), before)


@functools.lru_cache(maxsize=1024)
def _lock_part(lock_name: str) -> str:
    if not lock_name.startswith(_HASHED) and _LONGEST_FIXED + len(lock_name) <= (
        MAX_LOCK_NAME_LENGTH - 4  # room for a slot's index
    ):
        return lock_name
    return _HASHED + hashlib.sha256(lock_name.encode("utf-8", "surrogatepass")).hexdigest()
