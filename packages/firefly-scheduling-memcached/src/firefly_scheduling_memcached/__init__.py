"""Memcached lease-lock backend for firefly-scheduling (provider `memcached`)."""

from __future__ import annotations

from firefly_scheduling_memcached.aio_lock import AsyncMemcachedLock
from firefly_scheduling_memcached.lease_lock import MemcachedLock
from firefly_scheduling_memcached.version import __version__

__all__ = ["AsyncMemcachedLock", "MemcachedLock", "__version__"]
