"""The `memcached` provider's descriptor (entry point `firefly_scheduling.lock_providers`).

Its URL defaults to the local server; it keeps the initial-delay anchors at the
lock's URL by default. No run history and no control store of its own: memcached
may evict any item, and an evicted pause would lift itself.
"""

from __future__ import annotations

from firefly_scheduling.providers import LockProvider

PROVIDER = LockProvider(
    name="memcached",
    lock="firefly_scheduling_memcached.lock:MemcachedLock",
    async_lock="firefly_scheduling_memcached.lock_async:AsyncMemcachedLock",
    default_url="memcached://127.0.0.1:11211",
    anchor_store="firefly_scheduling_memcached.anchor_store:create_anchor_store",
    store_schemes=("memcached",),
    stores_at_lock_url=("anchor_store",),
    extra="firefly-scheduling[memcached]",
)
