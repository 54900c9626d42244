"""MemcachedLock and AsyncMemcachedLock against the shared contract, on a real memcached."""

from __future__ import annotations

from functools import partial

import pytest

from firefly_scheduling.testing import AsyncLockContract, LockContract
from firefly_scheduling_memcached import AsyncMemcachedLock, MemcachedLock

# A memcached URL cannot carry a password: the text protocol has no authentication, so
# credentials are refused at construction (test_memcached_configuration proves that,
# without echoing them). This string is therefore in no URL, and the case's checks that
# it never leaks hold trivially here; its other checks (LockBackendError, fast, a
# release that does not raise) are as real as for any backend.
PASSWORD = "memcached-has-no-password"


class TestMemcachedLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self, memcached_url: str) -> partial[MemcachedLock]:
        return partial(MemcachedLock, memcached_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[MemcachedLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return MemcachedLock("memcached://127.0.0.1:1"), PASSWORD


class TestAsyncMemcachedLockContract(AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, memcached_url: str) -> partial[AsyncMemcachedLock]:
        return partial(AsyncMemcachedLock, memcached_url)

    @pytest.fixture
    def sync_lock_factory(self, memcached_url: str) -> partial[MemcachedLock]:
        return partial(MemcachedLock, memcached_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncMemcachedLock, str]:
        return AsyncMemcachedLock("memcached://127.0.0.1:1"), PASSWORD
