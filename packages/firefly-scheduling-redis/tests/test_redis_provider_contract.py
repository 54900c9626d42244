"""RedisLock against the shared provider contract."""

from __future__ import annotations

import pytest

from firefly_scheduling.testing import ProviderContract
from firefly_scheduling_redis import RedisLock

SECRET = ProviderContract.secret


class TestRedisProvider(ProviderContract):
    provider = "redis"
    lock_class = RedisLock
    capabilities = {  # noqa: RUF012 - read-only table of expectations
        "backend_name": "redis",
        "ttl_honoured": True,
        "session_scoped": False,
        "cross_process": True,
        "supports_fencing": True,
    }
    wrong_kind_urls = (
        (f"postgresql://app:{SECRET}@db/app", "postgresql"),
        ("memcached://127.0.0.1:11211", "memcached"),
        ("127.0.0.1:6379", "scheme-less"),
    )
    default_repr = "RedisLock('redis://127.0.0.1:6379/0')"

    @pytest.fixture
    def configured_url(self) -> tuple[str, str]:
        return f"redis://:{SECRET}@cache:6380/2", "RedisLock('redis://:***@cache:6380/2')"
