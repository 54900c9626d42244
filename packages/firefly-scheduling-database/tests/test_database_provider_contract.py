"""DatabaseLeaseLock against the shared provider contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from firefly_scheduling.testing import ProviderContract
from firefly_scheduling_database import DatabaseLeaseLock

SECRET = ProviderContract.secret


class TestDatabaseProvider(ProviderContract):
    provider = "database"
    lock_class = DatabaseLeaseLock
    capabilities = {  # noqa: RUF012 - read-only table of expectations
        "backend_name": "database",
        "ttl_honoured": True,
        "session_scoped": False,
        "cross_process": True,
        "supports_fencing": True,
    }
    wrong_kind_urls = (
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis"),
        ("memcached://127.0.0.1:11211", "memcached"),
        ("127.0.0.1:5432", "scheme-less"),
    )
    falls_back_to_database_url = True

    @pytest.fixture
    def configured_url(self, tmp_path: Path) -> tuple[str, str]:
        url = f"sqlite:///{tmp_path / 'locks.db'}"
        return url, f"DatabaseLeaseLock('sqlite+pysqlite:///{tmp_path / 'locks.db'}')"
