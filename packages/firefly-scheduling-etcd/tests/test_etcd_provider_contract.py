"""EtcdLock against the shared provider contract."""

from __future__ import annotations

import pytest

from firefly_scheduling.testing import ProviderContract
from firefly_scheduling_etcd import EtcdLock

SECRET = ProviderContract.secret


class TestEtcdProvider(ProviderContract):
    provider = "etcd"
    lock_class = EtcdLock
    capabilities = {  # noqa: RUF012 - read-only table of expectations
        "backend_name": "etcd",
        "ttl_honoured": True,
        "session_scoped": False,
        "cross_process": True,
        "supports_fencing": True,
    }
    wrong_kind_urls = (
        (f"postgresql://app:{SECRET}@db/app", "postgresql"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis"),
        ("http://127.0.0.1:2379", "http"),
        ("127.0.0.1:2379", "scheme-less"),
    )
    default_repr = "EtcdLock('etcd://127.0.0.1:2379')"

    @pytest.fixture
    def configured_url(self) -> tuple[str, str]:
        return "etcd://etcd.internal:2381", "EtcdLock('etcd://etcd.internal:2381')"
