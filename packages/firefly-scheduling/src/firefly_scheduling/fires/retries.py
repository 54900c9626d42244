"""Retries: a failed fire run again, up to its task's `retries=`, each retry once.

A run that ends `failed` or `timed_out` asks the policy after its body
(`FirePolicy.after_body`); for a task with `retries=n` the default policy answers
(`retry_policy.next_retry`):

* `RunAgain(RetryOf(k, n, due, ...))` after attempt `k <= n` failed: retry `k` is
  due a delay after the failed run's end, drawn in `[0, min(retry_backoff_max,
  retry_backoff * 2**(k-1)))` from (task, instant, k) alike on every node
  (`schedule.retry_backoff`);
* `Skip(OVERLAPPING, reason)` when that time is not before the task's next fire
  and the task's `overlap=` is `skip` or `cancel_other`: the next fire takes over,
  and the fire's record says so. Under `buffer_one`, `buffer_all` and `allow_all`
  such a retry is asked for like any other: it meets the next fire's run at the task
  lock, and waits its turn or runs alongside as that policy says;
* `Run` (the run stands) after a success, after the last retry, for a task
  without retries, or after a run whose task lock was lost while it ran (another
  node may have adopted its fire meanwhile). Nothing is disabled or deleted: the
  task stays on its schedule.

A retry is a `Fire` of its own: the same task and instant, the trigger `retry`, and
`Fire.retry` (`RetryOf`) saying which retry it is and when it is due. It goes down
the whole fire path: grace counts from its due time, it takes a claim of its own
(`claims.claim_name`, the retry number in the name: two nodes never both run retry
k), the task lock (it never overlaps another run of the task), and its start takes
the fire's failed record over as the next attempt (`RetryStartingHistory`), so the
record holds the newest attempt, its number, and the text `retry k of n`.

The retry after attempt `a` is retry `a`: its number and due time follow from the
fire's record alone, so every node computes the same (`retry_policy.pending_retry`).
The host that ran the failed body keeps the retry until it is due
(`hosts.apscheduler.retries`, `tick` inline), and the other resident nodes learn of
it from the history (`hosts.apscheduler.retry_sweep`). docs/policies.md says what
holds under faults.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class RetryOf:
    """Which retry a fire is: retry `number` of `of`, due at `due` (aware UTC), run after
    the fire's attempt `after_attempt` failed (the attempt its start takes over)."""

    number: int
    of: int
    due: datetime
    after_attempt: int

    def __str__(self) -> str:
        return f"retry {self.number} of {self.of}"


@dataclass(frozen=True, slots=True)
class RetrySkipped:
    """The retry that was due after a failed run is not run, and why (`reason`)."""

    retry: RetryOf
    reason: str


def record_text(retry: RetryOf | None, error: str | None, next_step: str | None) -> str | None:
    """The text a run leaves in its record: which retry it was (`retry`; None: the
    fire's first run), its error, and what comes next (the next retry, or why it was
    skipped), joined by `; `."""
    parts = [None if retry is None else str(retry), error, next_step]
    text = "; ".join(part for part in parts if part)
    return text or None


def due_text(retry: RetryOf) -> str:
    """What a failed run's record says of the retry that follows it."""
    return f"{retry} due {retry.due.isoformat(timespec='milliseconds')}"
