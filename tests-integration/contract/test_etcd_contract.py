"""EtcdLock against the shared DistributedLock contract, on a real etcd."""

from __future__ import annotations

from functools import partial

import pytest

from firefly_scheduling.testing import AsyncLockContract, LockContract
from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock

# An etcd URL cannot carry a password: user/password authentication is refused at
# construction (test_etcd_configuration proves that, without echoing it). This string
# is therefore in no URL, and the case's checks that it never leaks hold trivially
# here; its other checks (LockBackendError, fast, a release that does not raise) are
# as real as for any backend.
PASSWORD = "etcd-urls-carry-no-password"


class TestEtcdLockContract(LockContract):
    @pytest.fixture
    def lock_factory(self, etcd_url: str) -> partial[EtcdLock]:
        return partial(EtcdLock, etcd_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[EtcdLock, str]:
        # Port 1 on loopback is closed: the connection is refused at once.
        return EtcdLock("etcd://127.0.0.1:1"), PASSWORD


class TestAsyncEtcdLockContract(AsyncLockContract):
    @pytest.fixture
    def lock_factory(self, etcd_url: str) -> partial[AsyncEtcdLock]:
        return partial(AsyncEtcdLock, etcd_url)

    @pytest.fixture
    def sync_lock_factory(self, etcd_url: str) -> partial[EtcdLock]:
        return partial(EtcdLock, etcd_url)

    @pytest.fixture
    def unreachable_lock(self) -> tuple[AsyncEtcdLock, str]:
        return AsyncEtcdLock("etcd://127.0.0.1:1"), PASSWORD
