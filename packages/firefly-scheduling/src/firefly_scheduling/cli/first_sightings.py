"""When `monitor` first saw each task: the start of the time a task can be judged by.

A freshly deployed daily task has no run yet, and must not be red until a fire was
due. The moment a task was first seen is kept in the anchor store (the lock
backend's own store, or `FIREFLY_SCHEDULING_INITIAL_DELAY_STORE`), written
add-if-absent under `firefly:scheduling:first-seen:<target>@<lock>`, so every later
`monitor` process, on any host, reads the first one back. A task the run history
has a record of was seen no later than that record's fire.

A store kept in one process's memory cannot remember anything between two `monitor`
processes: the sightings are then unknown, and every task is judged as if long
deployed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from firefly_scheduling.history import RunHistory
from firefly_scheduling.initial_delay.anchor import Anchor
from firefly_scheduling.initial_delay.port import AnchorStore
from firefly_scheduling.tasks.descriptor import ScheduledDescriptor

#: Every first sighting lives under this prefix, then `<target>@<lock>`.
FIRST_SEEN_KEY_PREFIX = "firefly:scheduling:first-seen:"


def first_seen_key(descriptor: ScheduledDescriptor) -> str:
    """The store key of the first sighting of `descriptor` under its lock name."""
    return f"{FIRST_SEEN_KEY_PREFIX}{descriptor.target}@{descriptor.lock_name}"


def first_sightings(
    descriptors: Sequence[ScheduledDescriptor], store: AnchorStore, history: RunHistory
) -> dict[str, datetime] | None:
    """The first sighting of each locked task, by target; None when `store` cannot keep them.

    Records each sighting not yet kept (add-if-absent: the first writer wins), and
    takes the newest history record's fire as an earlier sighting where there is one.
    Raises the store's `AnchorStoreError` or the history's `HistoryError`.
    """
    if not store.shared_across_processes:
        return None
    now = store.now()
    sightings: dict[str, datetime] = {}
    for descriptor in descriptors:
        lock = descriptor.lock_name
        if lock is None:
            continue
        key = first_seen_key(descriptor)
        raw = store.get(key)
        if raw is None:
            store.add(key, Anchor(now).encode())
            raw = store.get(key)
        anchor = None if raw is None else Anchor.decode(raw)
        seen = datetime.fromtimestamp(now if anchor is None else anchor.observed_at, UTC)
        newest = history.runs(descriptor.target, 1, lock=lock)
        if newest:
            seen = min(seen, newest[0].instant)
        sightings[descriptor.target] = seen
    return sightings
