"""MySqlNamedLock against the shared provider contract."""

from __future__ import annotations

import pytest

from firefly_scheduling.testing import ProviderContract
from firefly_scheduling_mysql import MySqlNamedLock

SECRET = ProviderContract.secret


class TestMySqlProvider(ProviderContract):
    provider = "mysql"
    lock_class = MySqlNamedLock
    capabilities = {  # noqa: RUF012 - read-only table of expectations
        "backend_name": "mysql",
        "ttl_honoured": False,
        "session_scoped": True,
        "cross_process": True,
        "supports_fencing": True,
    }
    wrong_kind_urls = (
        ("sqlite:///var/app.db", "sqlite"),
        (f"postgresql://app:{SECRET}@db/app", "postgresql"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis"),
        ("127.0.0.1:3306", "scheme-less"),
    )
    falls_back_to_database_url = True

    @pytest.fixture
    def configured_url(self) -> tuple[str, str]:
        return f"mysql://app:{SECRET}@db/app", "MySqlNamedLock('mysql://app:***@db/app')"
