"""EtcdLock against the shared DistributedLock contract, on a real etcd."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from firefly_scheduling.testing import AsyncLockContract, LockContract
from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_readers import EtcdReader

# An etcd URL cannot carry a password: user/password authentication is refused at
# construction (test_etcd_configuration proves that, without echoing it). This string
# is therefore in no URL, and the case's checks that it never leaks hold trivially
# here; its other checks (LockBackendError, fast, a release that does not raise) are
# as real as for any backend.
PASSWORD = "etcd-urls-carry-no-password"


class _Server:
    @pytest.fixture
    def server_reader(self, etcd_url: str) -> Iterator[EtcdReader]:
        reader = EtcdReader(etcd_url)
        yield reader
        reader.close()


class TestEtcdLockContract(_Server, LockContract):
    @pytest.fixture
    def lock_factory(self, etcd_url: str) -> partial[EtcdLock]:
        return partial(EtcdLock, etcd_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[EtcdLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return EtcdLock("etcd://127.0.0.1:1"), PASSWORD


class TestAsyncEtcdLockContract(_Server, AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, etcd_url: str) -> partial[AsyncEtcdLock]:
        return partial(AsyncEtcdLock, etcd_url)

    @pytest.fixture
    def sync_lock_factory(self, etcd_url: str) -> partial[EtcdLock]:
        return partial(EtcdLock, etcd_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncEtcdLock, str]:
        return AsyncEtcdLock("etcd://127.0.0.1:1"), PASSWORD
