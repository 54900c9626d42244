"""Construction of `PgAdvisoryLock`: URL kinds, libpq defaults, redaction, the provider."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from firefly_scheduling import ConfigurationError
from firefly_scheduling_postgres import PgAdvisoryLock
from firefly_scheduling_postgres.url import CLIENT_DEFAULTS, connection_info

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


# -- libpq key=value strings -----------------------------------------


def test_a_libpq_key_value_string_is_accepted_and_redacted_in_repr() -> None:
    lock = PgAdvisoryLock(f"host=127.0.0.1 port=1 dbname=app user=app password={SECRET}")
    assert repr(lock) == "PgAdvisoryLock('host=127.0.0.1 port=1 dbname=app user=app password=***')"
    assert lock.is_held("anything") is False


def test_a_key_value_string_gets_the_client_defaults_it_leaves_unset() -> None:
    params = conninfo_to_dict(
        connection_info(f"host=db dbname=app password='{SECRET} x' connect_timeout=2")
    )
    assert params["password"] == f"{SECRET} x"
    assert params["connect_timeout"] == "2"
    assert params["tcp_user_timeout"] == CLIENT_DEFAULTS["tcp_user_timeout"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (f"hots=db password={SECRET}", "invalid connection option \"hots\" (did you mean 'host'?)"),
        (f"host=db password {SECRET}", 'missing "=" after "password"'),
        (f"host=db {SECRET}=x", 'invalid connection option "***"'),
        (f"host=db password='{SECRET}", "unterminated quoted string"),
    ],
)
def test_a_key_value_string_libpq_cannot_read_is_never_shown(text: str, reason: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        PgAdvisoryLock(text)
    message = str(caught.value)
    assert reason in message
    assert "not shown" in message
    assert SECRET not in message
    assert caught.value.__context__ is None


def test_a_value_that_is_neither_url_nor_key_value_string_is_not_shown() -> None:
    with pytest.raises(ConfigurationError, match="scheme-less value") as caught:
        PgAdvisoryLock(SECRET)
    assert SECRET not in str(caught.value)
