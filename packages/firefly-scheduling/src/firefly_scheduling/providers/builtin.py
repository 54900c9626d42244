"""Core's own providers, `none` and `memory`, registered like any adapter's.

They take no URL. `memory` also serves `memory://` anchor, history and control stores, so an
explicit `memory://` store is found by the same loader as every other store.
"""

from __future__ import annotations

from firefly_scheduling.history.memory import MemoryRunHistory
from firefly_scheduling.initial_delay.memory import MemoryAnchorStore
from firefly_scheduling.providers.descriptor import LockProvider


def memory_anchor_store(url: str) -> MemoryAnchorStore:
    """The anchors of this process alone (`url` is `memory://`)."""
    return MemoryAnchorStore()


def memory_run_history(url: str) -> MemoryRunHistory:
    """The run history of this process alone (`url` is `memory://`)."""
    return MemoryRunHistory()


NONE = LockProvider(
    name="none",
    lock="firefly_scheduling.locks.none:NoneLock",
    async_lock="firefly_scheduling.locks.none:AsyncNoneLock",
    takes_url=False,
)

MEMORY = LockProvider(
    name="memory",
    lock="firefly_scheduling.locks.memory:InMemoryLock",
    async_lock="firefly_scheduling.locks.memory_async:AsyncInMemoryLock",
    takes_url=False,
    anchor_store=memory_anchor_store,
    history_store=memory_run_history,
    control_store="firefly_scheduling.control.memory:create_control_store",
    async_control_store="firefly_scheduling.control.memory_async:create_control_store",
    store_schemes=("memory",),
)
