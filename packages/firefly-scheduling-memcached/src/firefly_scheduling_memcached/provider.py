"""Entry point of the `memcached` lock provider (group `firefly_scheduling.lock_providers`)."""

from __future__ import annotations

from firefly_scheduling.settings import Settings
from firefly_scheduling_memcached.lease_lock import MemcachedLock


def create_lock(settings: Settings) -> MemcachedLock:
    """Build the lock from `firefly.scheduling.lock.memcached.url`, else the local server."""
    return MemcachedLock(settings.url_for("memcached"))
