"""Memcached lease-lock backend for firefly-scheduling (provider `memcached`)."""

from __future__ import annotations

from firefly_scheduling_memcached.lease_lock import MemcachedLock

__all__ = ["MemcachedLock"]
