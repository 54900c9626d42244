"""PgAdvisoryLock against the shared provider contract."""

from __future__ import annotations

import pytest

from firefly_scheduling.testing import ProviderContract
from firefly_scheduling_postgres import PgAdvisoryLock

SECRET = ProviderContract.secret


class TestPostgresProvider(ProviderContract):
    provider = "postgres"
    lock_class = PgAdvisoryLock
    capabilities = {  # noqa: RUF012 - read-only table of expectations
        "backend_name": "postgres",
        "ttl_honoured": False,
        "session_scoped": True,
        "cross_process": True,
        "supports_fencing": True,
    }
    wrong_kind_urls = (
        (f"mysql://root:{SECRET}@127.0.0.1:3306/test", "mysql"),
        ("sqlite:///var/app.db", "sqlite"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis"),
        (f"postgresql+psycopg://app:{SECRET}@db/app", "postgresql+psycopg"),
        ("127.0.0.1:5432", "scheme-less"),
    )
    falls_back_to_database_url = True

    @pytest.fixture
    def configured_url(self) -> tuple[str, str]:
        return f"postgresql://app:{SECRET}@db/app", "PgAdvisoryLock('postgresql://app:***@db/app')"
