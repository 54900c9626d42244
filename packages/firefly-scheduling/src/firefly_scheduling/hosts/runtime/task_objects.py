"""Build the object of every method task at boot, so a class that cannot be built stops it.

A method task runs on an instance of its class, made once per process with no
arguments or by the host's `resolver(cls)`. A class that cannot be made that way
(`__init__(self, db)` under `firefly-scheduling run`, a container that does not know
it) used to boot fine and then fail every fire as a task failure. The hosts that
check at boot (`run`, `tick`, the asyncio host) build those objects first, through
the runtime's own `CallableResolver`, which keeps them for the fires.

Only method tasks are resolved here: their modules are imported to reach the class.
A module of functions alone is still imported when its first task runs, so a host
started from the manifest does not import every task module to boot.
"""

from __future__ import annotations

from collections.abc import Sequence

from firefly_scheduling.tasks.callables import CallableResolver
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor


def method_tasks(descriptors: Sequence[ScheduledDescriptor]) -> list[str]:
    """The targets of the tasks that are methods (`pkg.module:Class.method`)."""
    return [d.target for d in descriptors if "." in d.target.partition(":")[2]]


def build_task_objects(
    descriptors: Sequence[ScheduledDescriptor], callables: CallableResolver
) -> None:
    """Resolve every method task through `callables`; the first failure raises.

    A `ConfigurationError` naming the task target and why its class could not be
    made (or its module imported).
    """
    for target in method_tasks(descriptors):
        callables.resolve(target)
