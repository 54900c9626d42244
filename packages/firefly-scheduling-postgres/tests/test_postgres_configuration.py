"""Construction of `PgAdvisoryLock`: URL kinds, libpq defaults, redaction, the provider."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from firefly_scheduling import ConfigurationError, Settings, resolve_lock
from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_postgres.advisory_lock import CLIENT_DEFAULTS, connection_info
from firefly_scheduling_postgres.provider import create_lock

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "POSTGRESQL"])
def test_libpq_url_kinds_are_accepted_without_connecting(scheme: str) -> None:
    # Port 1 is closed: construction must not try to connect.
    lock = PgAdvisoryLock(f"{scheme}://app:{SECRET}@127.0.0.1:1/app")
    assert lock.is_held("anything") is False


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        (f"mysql://root:{SECRET}@127.0.0.1:3306/test", "mysql"),
        ("sqlite:///var/app.db", "sqlite"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", "redis"),
        (f"postgresql+psycopg://app:{SECRET}@db/app", "postgresql+psycopg"),
    ],
)
def test_other_url_kinds_are_refused_naming_provider_and_scheme(url: str, scheme: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        PgAdvisoryLock(url)
    message = str(caught.value)
    assert "postgres lock provider" in message
    assert scheme in message
    assert SECRET not in message


@pytest.mark.parametrize("url", ["", "   ", "127.0.0.1:5432"])
def test_missing_or_scheme_less_url_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="postgres"):
        PgAdvisoryLock(url)


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


def test_capabilities_describe_a_session_scoped_fencing_backend() -> None:
    assert PgAdvisoryLock.backend_name == "postgres"
    assert PgAdvisoryLock.session_scoped is True
    assert PgAdvisoryLock.ttl_honoured is False
    assert PgAdvisoryLock.cross_process is True
    assert PgAdvisoryLock.supports_fencing is True


def test_provider_reads_the_postgres_url() -> None:
    lock = create_lock(Settings(postgres_url=f"postgresql://app:{SECRET}@db/app"))
    assert isinstance(lock, PgAdvisoryLock)
    assert repr(lock) == "PgAdvisoryLock('postgresql://app:***@db/app')"


def test_provider_falls_back_to_database_url() -> None:
    settings = Settings.from_env({"DATABASE_URL": "postgres://app@db/app"})
    assert repr(create_lock(settings)) == "PgAdvisoryLock('postgres://app@db/app')"


def test_provider_without_a_url_names_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="FIREFLY_SCHEDULING_LOCK_POSTGRES_URL"):
        create_lock(Settings())


def test_provider_is_found_through_its_entry_point() -> None:
    settings = Settings.from_env(
        {
            "FIREFLY_SCHEDULING_LOCK_PROVIDER": "postgres",
            "FIREFLY_SCHEDULING_LOCK_POSTGRES_URL": "postgresql://app@db/app",
        }
    )
    assert isinstance(resolve_lock(settings), PgAdvisoryLock)
