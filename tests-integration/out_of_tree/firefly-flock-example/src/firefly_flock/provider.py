"""The `flock` provider's descriptor: all core learns of this backend."""

from __future__ import annotations

from firefly_scheduling.providers import LockProvider

PROVIDER = LockProvider(
    name="flock",
    lock="firefly_flock.lock:FlockLock",
    anchor_store="firefly_flock.anchors:FlockAnchorStore",
    store_schemes=("flock",),
    stores_at_lock_url=("anchor_store",),
    extra="firefly-flock-example",
)
