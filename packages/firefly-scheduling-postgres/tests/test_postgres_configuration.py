"""Construction of `PgAdvisoryLock`: URL kinds, libpq defaults, redaction, the provider."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from firefly_scheduling import ConfigurationError
from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_postgres.advisory_lock import CLIENT_DEFAULTS, connection_info

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "POSTGRESQL"])
def test_libpq_url_kinds_are_accepted_without_connecting(scheme: str) -> None:
    # Port 1 is closed: construction must not try to connect.
    lock = PgAdvisoryLock(f"{scheme}://app:{SECRET}@127.0.0.1:1/app")
    assert lock.is_held("anything") is False


def test_url_libpq_cannot_parse_is_refused_without_the_password() -> None:
    with pytest.raises(ConfigurationError, match="invalid URL") as caught:
        PgAdvisoryLock(f"postgresql://app:{SECRET}@db/app?no_such_parameter=1")
    assert SECRET not in str(caught.value)
    assert caught.value.__cause__ is None


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"postgresql://app:{SECRET}@db.internal:5432/app",
            "PgAdvisoryLock('postgresql://app:***@db.internal:5432/app')",
        ),
        (
            f"postgres://app@db/app?password={SECRET}&sslmode=require",
            "PgAdvisoryLock('postgres://app@db/app?password=***&sslmode=require')",
        ),
    ],
)
def test_repr_shows_the_redacted_url(url: str, shown: str) -> None:
    assert repr(PgAdvisoryLock(url)) == shown


def test_client_defaults_fill_only_what_the_url_leaves_unset() -> None:
    params = conninfo_to_dict(
        connection_info("postgresql://app@db/app?connect_timeout=2&application_name=billing")
    )
    assert params["connect_timeout"] == "2"
    assert params["application_name"] == "billing"
    assert params["tcp_user_timeout"] == CLIENT_DEFAULTS["tcp_user_timeout"]
    assert params["keepalives"] == "1"
    assert (params["host"], params["dbname"], params["user"]) == ("db", "app", "app")
