"""What a valid `catchup=`/`catchup_limit=` pair is, checked at boot with the task's other fields.

`catchup` is a duration like the others (`validation` checks it is one, 1 ms to 366
days). Here, the rest: a limit is a positive `int` (a `bool` is refused, though Python
counts it as one), a limit without a window is refused rather than ignored, and the
window needs fires every node names alike and a history to read them from, so a
`fixed_delay` task (its instants are each node's own) and an unlocked task (the
history keys a fire by its lock name) are refused too. Whether the host has a run
history is known only once the settings are read: `hosts.runtime.boot` checks that.
"""

from __future__ import annotations

from typing import Final

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

#: How many missed fires a task with `catchup=` runs when it gives no `catchup_limit=`.
DEFAULT_CATCHUP_LIMIT: Final = 100


def check_catch_up(descriptor: ScheduledDescriptor, target: str) -> int | None:
    """The task's catch-up limit in effect (None without `catchup`), or a refusal naming it."""
    catchup, limit = descriptor.catchup, descriptor.catchup_limit
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigurationError(
            f"{target}: catchup_limit={limit!r} is not a positive whole number of fires"
        )
    if catchup is None:
        if limit is not None:
            raise ConfigurationError(
                f"{target}: catchup_limit={limit!r} is given without catchup=; give the "
                "window the missed fires are caught up within (catchup='1h'), or drop "
                "catchup_limit="
            )
        return None
    if descriptor.fixed_delay is not None:
        raise ConfigurationError(
            f"{target}: catchup={catchup!r} needs a cron or fixed_rate task; a fixed_delay "
            "task's fires are each node's own, so no fire of it can be missed fleet-wide"
        )
    if descriptor.lock_name is None:
        raise ConfigurationError(
            f"{target}: catchup={catchup!r} needs a locked task; the run history, where "
            "missed fires are found, keys each fire by its lock name"
        )
    return DEFAULT_CATCHUP_LIMIT if limit is None else limit
