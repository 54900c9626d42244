"""MemcachedLock and AsyncMemcachedLock against the shared contract, on a real memcached."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from firefly_scheduling.testing import AsyncLockContract, LockContract
from firefly_scheduling_memcached import AsyncMemcachedLock, MemcachedLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_readers import MemcachedReader

# A memcached URL cannot carry a password: the text protocol has no authentication, so
# credentials are refused at construction (test_memcached_configuration proves that,
# without echoing them). This string is therefore in no URL, and the case's checks that
# it never leaks hold trivially here; its other checks (LockBackendError, fast, a
# release that does not raise) are as real as for any backend.
PASSWORD = "memcached-has-no-password"


class _Server:
    @pytest.fixture
    def server_reader(self, memcached_url: str) -> Iterator[MemcachedReader]:
        reader = MemcachedReader(memcached_url)
        yield reader
        reader.close()


class TestMemcachedLockContract(_Server, LockContract):
    @pytest.fixture
    def lock_factory(self, memcached_url: str) -> partial[MemcachedLock]:
        return partial(MemcachedLock, memcached_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[MemcachedLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return MemcachedLock("memcached://127.0.0.1:1"), PASSWORD


class TestAsyncMemcachedLockContract(_Server, AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, memcached_url: str) -> partial[AsyncMemcachedLock]:
        return partial(AsyncMemcachedLock, memcached_url)

    @pytest.fixture
    def sync_lock_factory(self, memcached_url: str) -> partial[MemcachedLock]:
        return partial(MemcachedLock, memcached_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncMemcachedLock, str]:
        return AsyncMemcachedLock("memcached://127.0.0.1:1"), PASSWORD
