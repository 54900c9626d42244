"""`FireOutcome`: what the fire runner did with one fire, for hosts, logs and tests."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class FireStatus(enum.StrEnum):
    """What `FireRunner.run` did with a fire."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    #: Another node (or an earlier attempt) holds this fire's claim.
    CLAIMED_ELSEWHERE = "claimed elsewhere"
    #: The history refused the start: the fire is finished, or a newer attempt owns it.
    ALREADY_RECORDED = "already recorded"
    #: The claim was won but the task lock is held: the previous fire still runs.
    OVERLAPPING = "skipped: the previous fire still runs"
    TOO_LATE = "skipped: later than grace"
    BACKEND_ERROR = "skipped: the lock backend failed"
    #: A died run found in the history, closed instead of adopted (too late).
    EXPIRED = "expired"
    #: The task lock was reported lost before this fire's body could start.
    LOCK_LOST = "skipped: the task lock was lost"


@dataclass(frozen=True)
class FireOutcome:
    """The result of one fire, and of the died runs it adopted or expired on the way.

    `lost`: the lock was reported lost while the body ran. `fenced`: the history
    refused this run's final write because a newer attempt took the fire over.
    `claim_seconds`: how long claiming the fire took, its round trip included (None
    when no claim was attempted: an unlocked or `fixed_delay` task, a fire too late);
    for a host's metrics.
    """

    status: FireStatus
    target: str
    instant: datetime
    attempt: int | None = None
    token: int | None = None
    lost: bool = False
    fenced: bool = False
    error: str | None = None
    adopted: tuple[FireOutcome, ...] = ()
    claim_seconds: float | None = None

    @property
    def ran(self) -> bool:
        """Whether this node ran the body for this fire."""
        return self.status in {FireStatus.SUCCEEDED, FireStatus.FAILED}
