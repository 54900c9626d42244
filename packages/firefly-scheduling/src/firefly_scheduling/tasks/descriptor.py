"""`ScheduledDescriptor`: one task, as plain values.

It is what the scanner emits, what the manifest stores and what hosts schedule. It
holds no function object, so loading descriptors imports no application code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TriggerKind = Literal["cron", "fixed_rate", "fixed_delay"]

DEFAULT_LOCK_TTL_SECONDS = 30.0


@dataclass(frozen=True)
class ScheduledDescriptor:
    """A scheduled task.

    `target` is `"package.module:Qualname"` (a function, or `Class.method`).
    Exactly one of `cron`, `fixed_rate` and `fixed_delay` is set. Durations are
    float seconds. `lock_name` is None for an unlocked task; `lock_ttl` is then
    None too, and defaults to 30.0 for a locked one. `dst_gap` and `dst_fold` (cron
    tasks only) are the DST policies as given; None is the default (see `schedule.dst`).
    `jitter` (seconds, None: none) delays each fire's start by an offset in
    `[0, jitter)` derived from the task and the instant (`schedule.jitter`).
    `timeout` (seconds, None: none) bounds each run's body (`fires.running`).
    `retries` (None: none), `retry_backoff` and `retry_backoff_max` (seconds, None:
    their defaults) run a failed fire again (`tasks.retry_arguments`).
    `overlap` (None: `skip`) is what a fire does while an earlier run of the task
    still runs anywhere in the fleet (`tasks.overlap`).
    `catchup` (seconds, None: none) is the window within which fires missed while the
    fleet was down run late, at most `catchup_limit` of them, the newest
    (`fires.catching_up`); validation sets the limit to 100 when `catchup` is given.
    """

    target: str
    cron: str | None = None
    fixed_rate: float | None = None
    fixed_delay: float | None = None
    initial_delay: float | None = None
    zone: str | None = None
    lock_name: str | None = None
    lock_ttl: float | None = None
    dst_gap: str | None = None
    dst_fold: str | None = None
    jitter: float | None = None
    timeout: float | None = None
    retries: int | None = None
    retry_backoff: float | None = None
    retry_backoff_max: float | None = None
    overlap: str | None = None
    catchup: float | None = None
    catchup_limit: int | None = None

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def qualname(self) -> str:
        return self.target.partition(":")[2]

    @property
    def trigger_kind(self) -> TriggerKind:
        """Which of the three triggers this task uses (boot validation ensures exactly one)."""
        if self.cron is not None:
            return "cron"
        return "fixed_rate" if self.fixed_rate is not None else "fixed_delay"

    @property
    def locked(self) -> bool:
        """Whether runs of this task are guarded by a distributed lock."""
        return self.lock_name is not None
