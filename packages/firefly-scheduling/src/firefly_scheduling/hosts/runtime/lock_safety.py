"""Say, at boot, which lock guards the tasks, and refuse to run unguarded on demand.

The default provider (`none`) and `memory` exclude nothing across processes: every
node of a fleet runs every locked task. That is right for one node and for local
development, and silently wrong in production, so a host that boots locked tasks on
such a lock logs a WARNING naming how many there are. A deployment that must never
run that way sets `firefly.scheduling.lock.required`
(`FIREFLY_SCHEDULING_LOCK_REQUIRED=true`) and the warning becomes a refusal at boot
(exit 2). Either way the startup line names the provider and the lock's redacted
target, so an operator reading one log line knows where the locks are kept.

Whatever the lock, `check_task_locks` looks at the tasks themselves: under
`lock.required` a task declared `lock=False` (it runs on every node by design) is
refused by name, and tasks sharing one lock name draw a WARNING naming them, since
they exclude each other: while one runs, the others' fires are skipped.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence

from firefly_scheduling.errors import ConfigurationError
from firefly_scheduling.locks.port import capabilities_of
from firefly_scheduling.settings import Settings, env_var
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

logger = logging.getLogger("firefly_scheduling.hosts")

REQUIRED_KEY = "firefly.scheduling.lock.required"


def check_lock_guards(
    descriptors: Sequence[ScheduledDescriptor], settings: Settings, lock: object, *, host: str
) -> None:
    """Log the startup line; warn about (or, when required, refuse) unguarded locked tasks."""
    locked = [d.target for d in descriptors if d.lock_name is not None]
    logger.info(
        "%s host: %d task(s), %d locked; lock provider %r: %r",
        host,
        len(descriptors),
        len(locked),
        settings.lock_provider,
        lock,
    )
    if not locked or capabilities_of(lock).cross_process:
        return
    problem = (
        f"{len(locked)} locked task(s) run under the {settings.lock_provider!r} lock "
        f"provider, which excludes nothing across processes: every node will run them "
        f"({', '.join(sorted(locked)[:5])}{', ...' if len(locked) > 5 else ''})"
    )
    if settings.lock_required:
        raise ConfigurationError(
            f"{problem}; {env_var(REQUIRED_KEY)} ({REQUIRED_KEY}) is set, so this host "
            f"refuses to start: configure a shared lock provider "
            f"(FIREFLY_SCHEDULING_LOCK_PROVIDER)"
        )
    logger.warning(
        "%s. Configure a shared lock provider (FIREFLY_SCHEDULING_LOCK_PROVIDER), or set "
        "%s=true to refuse to start like this.",
        problem,
        env_var(REQUIRED_KEY),
    )


def check_task_locks(descriptors: Sequence[ScheduledDescriptor], settings: Settings) -> None:
    """Refuse unlocked tasks under `lock.required`; warn about tasks sharing a lock name."""
    unlocked = sorted(d.target for d in descriptors if d.lock_name is None)
    if unlocked and settings.lock_required:
        raise ConfigurationError(
            f"{len(unlocked)} task(s) are declared lock=False and would run on every node: "
            f"{', '.join(unlocked)}; {env_var(REQUIRED_KEY)} ({REQUIRED_KEY}) is set, so this "
            "host refuses to start: lock them (lock=True, the default, or a lock name), or "
            f"unset {env_var(REQUIRED_KEY)}"
        )
    sharing: dict[str, list[str]] = defaultdict(list)
    for descriptor in descriptors:
        if descriptor.lock_name is not None:
            sharing[descriptor.lock_name].append(descriptor.target)
    for name, targets in sharing.items():
        if len(targets) > 1:
            logger.warning(
                "tasks %s share the lock %r: they exclude each other, and while one runs "
                "the fires of the others are skipped. Give each its own lock (lock=True) "
                "unless that is the intent",
                ", ".join(targets),
                name,
            )
