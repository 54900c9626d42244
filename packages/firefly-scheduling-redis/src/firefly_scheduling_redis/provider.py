"""The `redis` provider's descriptor (entry point `firefly_scheduling.lock_providers`).

Its URL falls back to `REDIS_URL`, then to the local server; it keeps the
initial-delay anchors and the control store at the lock's URL by default. No run
history of its own.
"""

from __future__ import annotations

from firefly_scheduling.providers import LockProvider

PROVIDER = LockProvider(
    name="redis",
    lock="firefly_scheduling_redis.lock:RedisLock",
    async_lock="firefly_scheduling_redis.lock_async:AsyncRedisLock",
    url_fallbacks=("REDIS_URL",),
    default_url="redis://127.0.0.1:6379/0",
    anchor_store="firefly_scheduling_redis.anchor_store:create_anchor_store",
    control_store="firefly_scheduling_redis.control_store:create_control_store",
    async_control_store="firefly_scheduling_redis.control_store_async:create_control_store",
    store_schemes=("redis", "rediss", "redis+cluster", "rediss+cluster"),
    stores_at_lock_url=("anchor_store", "control_store"),
    extra="firefly-scheduling[redis]",
)
