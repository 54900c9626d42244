"""MemcachedLock against the shared provider contract."""

from __future__ import annotations

import pytest

from firefly_scheduling.testing import ProviderContract
from firefly_scheduling_memcached import MemcachedLock

SECRET = ProviderContract.secret


class TestMemcachedProvider(ProviderContract):
    provider = "memcached"
    lock_class = MemcachedLock
    capabilities = {  # noqa: RUF012 - read-only table of expectations
        "backend_name": "memcached",
        "ttl_honoured": True,
        "session_scoped": False,
        "cross_process": True,
        "supports_fencing": True,
    }
    wrong_kind_urls = (
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis"),
        (f"postgresql://app:{SECRET}@127.0.0.1/app", "postgresql"),
        ("127.0.0.1:11211", "scheme-less"),
    )
    default_repr = "MemcachedLock('memcached://127.0.0.1:11211')"

    @pytest.fixture
    def configured_url(self) -> tuple[str, str]:
        # memcached URLs carry no credentials (the text protocol has no authentication).
        return "memcached://cache:11212", "MemcachedLock('memcached://cache:11212')"
