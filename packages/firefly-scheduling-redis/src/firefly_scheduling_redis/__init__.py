"""Redis lease-lock backend for firefly-scheduling (provider `redis`)."""

from __future__ import annotations

from firefly_scheduling_redis.lease_lock import RedisLock

__all__ = ["RedisLock"]
