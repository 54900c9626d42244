"""Redis lease-lock backend for firefly-scheduling (provider `redis`)."""

from __future__ import annotations

from firefly_scheduling_redis.aio_lease_lock import AsyncRedisLock
from firefly_scheduling_redis.lease_lock import RedisLock
from firefly_scheduling_redis.version import __version__

__all__ = ["AsyncRedisLock", "RedisLock", "__version__"]
