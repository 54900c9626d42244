"""The initial-delay gate and the stores its anchors live in."""

from __future__ import annotations

from firefly_scheduling.initial_delay.anchor import ANCHOR_KEY_PREFIX, Anchor, anchor_key
from firefly_scheduling.initial_delay.base import BaseAnchorStore
from firefly_scheduling.initial_delay.gate import (
    InitialDelayGate,
    check_initial_delays,
    delayed_tasks,
    warn_if_per_process,
)
from firefly_scheduling.initial_delay.memory import MemoryAnchorStore
from firefly_scheduling.initial_delay.port import AnchorStore, AnchorStoreError
from firefly_scheduling.initial_delay.selection import (
    anchor_store_url,
    resolve_anchor_store,
    shared_anchor_stores,
)

__all__ = [
    "ANCHOR_KEY_PREFIX",
    "Anchor",
    "AnchorStore",
    "AnchorStoreError",
    "BaseAnchorStore",
    "InitialDelayGate",
    "MemoryAnchorStore",
    "anchor_key",
    "anchor_store_url",
    "check_initial_delays",
    "delayed_tasks",
    "resolve_anchor_store",
    "shared_anchor_stores",
    "warn_if_per_process",
]
