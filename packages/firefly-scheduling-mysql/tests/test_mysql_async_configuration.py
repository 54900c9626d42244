"""`AsyncMySqlNamedLock` reads a URL exactly as `MySqlNamedLock` does, and asyncmy gets it all.

Both flavours build their arguments from `connection_arguments`; these cases prove
the asyncio one refuses the same strings with the same words, hides the same
secrets, and that the translation to asyncmy loses nothing the URL set.
"""

from __future__ import annotations

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_mysql import AsyncMySqlNamedLock, MySqlNamedLock
from firefly_scheduling_mysql.url import asyncmy_arguments, connection_arguments

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    "url",
    [
        "",
        "127.0.0.1:3306",
        f"postgresql://app:{SECRET}@db/app",
        f"mysql://app:{SECRET}@db/app?pool_size=5",
        f"mysql://app:{SECRET}@db/app?read_timeout=0",
        f"mysql://app:{SECRET}@db:notaport/app",
    ],
)
def test_both_flavours_refuse_a_bad_url_with_the_same_message_and_no_secret(url: str) -> None:
    with pytest.raises(ConfigurationError) as sync_refusal:
        MySqlNamedLock(url)
    with pytest.raises(ConfigurationError) as async_refusal:
        AsyncMySqlNamedLock(url)
    assert str(async_refusal.value) == str(sync_refusal.value)
    assert SECRET not in str(async_refusal.value)


def test_repr_shows_the_redacted_url() -> None:
    lock = AsyncMySqlNamedLock(f"mysql://app:{SECRET}@db.internal:3306/app")
    assert repr(lock) == "AsyncMySqlNamedLock('mysql://app:***@db.internal:3306/app')"


def test_asyncmy_gets_the_same_server_credentials_and_timeouts() -> None:
    url = f"mysql://app:{SECRET}@db:3307/app?read_timeout=2&connect_timeout=3&charset=utf8mb4"
    arguments = asyncmy_arguments(connection_arguments(url))
    assert arguments == {
        "host": "db",
        "port": 3307,
        "user": "app",
        "password": SECRET,
        "database": "app",
        "charset": "utf8mb4",
        "connect_timeout": 3.0,
        "read_timeout": 2.0,
    }


@pytest.mark.parametrize(
    ("query", "ssl"),
    [
        ("ssl_ca=/ca.pem", {"ca": "/ca.pem", "check_hostname": False, "verify_mode": False}),
        (
            "ssl_ca=/ca.pem&ssl_verify_cert=true",
            {"ca": "/ca.pem", "check_hostname": False, "verify_mode": True},
        ),
        (
            "ssl_ca=/ca.pem&ssl_verify_identity=true&ssl_cert=/c.pem&ssl_key=/k.pem",
            {
                "ca": "/ca.pem",
                "check_hostname": True,
                "verify_mode": True,
                "cert": "/c.pem",
                "key": "/k.pem",
            },
        ),
    ],
)
def test_tls_parameters_become_asyncmys_ssl_dict_as_pymysql_builds_its_own(
    query: str, ssl: dict[str, object]
) -> None:
    arguments = asyncmy_arguments(connection_arguments(f"mysql://app@db/app?{query}"))
    assert arguments["ssl"] == ssl
    assert not any(key.startswith("ssl_") for key in arguments)


def test_no_tls_parameter_means_no_ssl_argument() -> None:
    assert "ssl" not in asyncmy_arguments(connection_arguments("mysql://app@db/app"))
