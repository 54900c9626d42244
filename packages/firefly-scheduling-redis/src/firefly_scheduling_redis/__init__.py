"""Redis lease-lock backend for firefly-scheduling (provider `redis`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lock_exports
from firefly_scheduling_redis.provider import PROVIDER
from firefly_scheduling_redis.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_redis.aio_lease_lock import AsyncRedisLock
    from firefly_scheduling_redis.lease_lock import RedisLock

__all__ = ["AsyncRedisLock", "RedisLock", "__version__"]

# The lock classes the descriptor names, imported on first use: loading the descriptor
# (`provider.py`) imports no driver.
__getattr__ = lock_exports(__name__, PROVIDER)
