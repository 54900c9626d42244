"""Redis lease-lock backend for firefly-scheduling (provider `redis`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from firefly_scheduling.providers.lazy import lock_exports
from firefly_scheduling_redis.provider import PROVIDER
from firefly_scheduling_redis.version import __version__

if TYPE_CHECKING:
    from firefly_scheduling_redis.lock import RedisLock
    from firefly_scheduling_redis.lock_async import AsyncRedisLock

__all__ = ["AsyncRedisLock", "RedisLock", "__version__"]

# The lock classes the descriptor names, imported on first use: loading the descriptor
# (`provider.py`) imports no driver.
__getattr__ = lock_exports(__name__, PROVIDER)
