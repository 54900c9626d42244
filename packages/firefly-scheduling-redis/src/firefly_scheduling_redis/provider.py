"""Entry point of the `redis` lock provider (group `firefly_scheduling.lock_providers`)."""

from __future__ import annotations

from firefly_scheduling.settings import Settings
from firefly_scheduling_redis.lease_lock import RedisLock


def create_lock(settings: Settings) -> RedisLock:
    """Build the lock from `firefly.scheduling.lock.redis.url`, else `REDIS_URL`, else local."""
    return RedisLock(settings.url_for("redis"))
