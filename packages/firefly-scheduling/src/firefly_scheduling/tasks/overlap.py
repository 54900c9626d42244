"""`overlap=`: what a fire does when an earlier run of its task still runs, fleet-wide.

The names a task may give, and the boot check of one (`check_overlap`, called by
`tasks.validation`). What each name does is the `when_held` answer of the policy
seam (`fires.policy.overlap_answer`), `fires.overlap_wait` for the fires that wait,
and `fires.cancel_watch` for the runs `cancel_other` may ask to stop.

Only a locked, recurring task can ask for anything but `skip`: the task lock is how
a node learns that an earlier run still runs anywhere in the fleet, and the fire
claim is what keeps a fire run once when runs may overlap. An unlocked task runs on
every node and a `fixed_delay` task starts each run when the previous one ended,
so neither has fires that meet an earlier run.
"""

from __future__ import annotations

import enum
from typing import Final

from firefly_scheduling.errors import ConfigurationError


class Overlap(enum.StrEnum):
    """The overlap policies; the value is what `@scheduled(overlap=...)` takes."""

    #: The fire is skipped, recorded as overlapping (the default).
    SKIP = "skip"
    #: The fire runs alongside the earlier run, without the task lock.
    ALLOW_ALL = "allow_all"
    #: The fire waits for the earlier run to end, if no other fire waits already.
    BUFFER_ONE = "buffer_one"
    #: Every fire waits its turn, oldest first, up to `BUFFER_ALL_MAX_WAITING` at once.
    BUFFER_ALL = "buffer_all"
    #: The earlier run is asked to stop, then the fire runs.
    CANCEL_OTHER = "cancel_other"


#: The most fires of one `buffer_all` task that wait at once, fleet-wide; a fire that
#: comes while that many wait is skipped, recorded with why.
BUFFER_ALL_MAX_WAITING: Final = 10
#: The most runs of one `allow_all` task a node starts at once; a fire that comes to a
#: node running that many is passed over there (recorded when no node runs it).
ALLOW_ALL_RUNS_PER_NODE: Final = 16


def runs_per_node(overlap: str | None) -> int:
    """How many fires of a task with this `overlap` a host lets go at once on one node:
    one (`skip`), the running one and those waiting (`buffer_one`, `buffer_all`, and
    `cancel_other`'s replacement), or
    `ALLOW_ALL_RUNS_PER_NODE`. A host counts a worker thread for each."""
    if overlap in {Overlap.BUFFER_ONE, Overlap.CANCEL_OTHER}:
        return 2
    if overlap == Overlap.BUFFER_ALL:
        return 1 + BUFFER_ALL_MAX_WAITING
    if overlap == Overlap.ALLOW_ALL:
        return ALLOW_ALL_RUNS_PER_NODE
    return 1


def check_overlap(
    overlap: object, target: str, *, locked: bool, fixed_delay: bool
) -> Overlap | None:
    """The task's overlap policy, None for the default `skip`; else a `ConfigurationError`
    naming the task, the value and the allowed values."""
    if overlap is None:
        return None
    allowed = ", ".join(repr(each.value) for each in Overlap)
    if not isinstance(overlap, str) or overlap not in Overlap.__members__.values():
        raise ConfigurationError(
            f"{target}: overlap={overlap!r} is not an overlap policy; expected one of {allowed}"
        )
    policy = Overlap(overlap)
    if policy is Overlap.SKIP:
        return None
    if not locked:
        raise ConfigurationError(
            f"{target}: overlap={overlap!r} needs a locked task: an unlocked task (lock=False) "
            "runs on every node and takes no lock, so no fire ever meets an earlier run; "
            "pass lock=True or a lock name, or drop overlap="
        )
    if fixed_delay:
        raise ConfigurationError(
            f"{target}: overlap={overlap!r} does not apply to a fixed_delay task: each run "
            "starts when the previous one ended; use fixed_rate or cron, or drop overlap="
        )
    return policy
