"""Memcached lease-lock backend for firefly-scheduling (provider `memcached`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lock_exports
from firefly_scheduling_memcached.provider import PROVIDER
from firefly_scheduling_memcached.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_memcached.lock import MemcachedLock
    from firefly_scheduling_memcached.lock_async import AsyncMemcachedLock

__all__ = ["AsyncMemcachedLock", "MemcachedLock", "__version__"]

# The lock classes the descriptor names, imported on first use: loading the descriptor
# (`provider.py`) imports no driver.
__getattr__ = lock_exports(__name__, PROVIDER)
