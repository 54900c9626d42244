"""Memcached lease-lock backend for firefly-scheduling (provider `memcached`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lazy_exports
from firefly_scheduling_memcached.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_memcached.aio_lock import AsyncMemcachedLock
    from firefly_scheduling_memcached.lease_lock import MemcachedLock

__all__ = ["AsyncMemcachedLock", "MemcachedLock", "__version__"]

# Imported on first use, so that loading the descriptor (`provider.py`) imports no driver.
__getattr__ = lazy_exports(
    __name__,
    {
        "AsyncMemcachedLock": "firefly_scheduling_memcached.aio_lock",
        "MemcachedLock": "firefly_scheduling_memcached.lease_lock",
    },
)
