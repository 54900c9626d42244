"""Construction of `MySqlNamedLock`: URL kinds and parameters, redaction, the provider."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from firefly_scheduling import ConfigurationError
from firefly_scheduling_mysql import MySqlNamedLock
from firefly_scheduling_mysql.protocol import unsupported_version
from firefly_scheduling_mysql.url import DEFAULT_TIMEOUTS, connection_arguments

SECRET = "s3cr3t-pw"


@pytest.mark.parametrize(
    "scheme", ["mysql", "mariadb", "MySQL", "mysql+pymysql", "mariadb+pymysql"]
)
def test_mysql_url_kinds_are_accepted_without_connecting(scheme: str) -> None:
    # Port 1 is closed: construction must not try to connect.
    lock = MySqlNamedLock(f"{scheme}://app:{SECRET}@127.0.0.1:1/app")
    assert lock.is_held("anything") is False


@pytest.mark.parametrize("url", ["", "   ", "127.0.0.1:3306", "mysql://db:notaport/app"])
def test_missing_scheme_less_or_malformed_url_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="mysql"):
        MySqlNamedLock(url)


def test_url_parts_become_driver_arguments_percent_decoded() -> None:
    arguments = connection_arguments("mysql://app%40eu:p%3Ass%2Fw@db.internal:3307/sched%2Dule")
    assert arguments["user"] == "app@eu"
    assert arguments["password"] == "p:ss/w"
    assert (arguments["host"], arguments["port"]) == ("db.internal", 3307)
    assert arguments["database"] == "sched-ule"


def test_defaults_are_bounded_timeouts_utf8mb4_and_port_3306() -> None:
    arguments = connection_arguments("mysql://db")
    assert (arguments["port"], arguments["charset"]) == (3306, "utf8mb4")
    assert (arguments["user"], arguments["password"], arguments["database"]) == (None, "", None)
    for key, seconds in DEFAULT_TIMEOUTS.items():
        assert arguments[key] == seconds
        assert 0 < seconds <= 10


def test_query_parameters_reach_the_driver() -> None:
    arguments = connection_arguments(
        "mariadb://app@localhost/app?unix_socket=/run/mysqld/mysqld.sock&charset=latin1"
        "&connect_timeout=2&read_timeout=1.5&ssl_ca=/etc/ca.pem&ssl_verify_cert=true"
    )
    assert arguments["unix_socket"] == "/run/mysqld/mysqld.sock"
    assert arguments["charset"] == "latin1"
    assert (arguments["connect_timeout"], arguments["read_timeout"]) == (2.0, 1.5)
    assert arguments["write_timeout"] == DEFAULT_TIMEOUTS["write_timeout"]
    assert (arguments["ssl_ca"], arguments["ssl_verify_cert"]) == ("/etc/ca.pem", True)


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("pool_size=5", "does not know the URL option 'pool_size'"),
        (f"password={SECRET}", "does not know the URL option 'password'"),
        ("charset=klingon", "unknown charset 'klingon'"),
        ("read_timeout=0", "read_timeout must be a positive number"),
        ("connect_timeout=-1", "connect_timeout must be a positive number"),
        ("write_timeout=inf", "write_timeout must be a positive number"),
        ("read_timeout=soon", "read_timeout must be a positive number"),
        ("ssl_verify_cert=maybe", "ssl_verify_cert must be true or false"),
        ("unix_socket=", "unix_socket must not be empty"),
    ],
)
def test_unusable_query_parameters_are_refused_without_the_password(
    query: str, problem: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        MySqlNamedLock(f"mysql://app:{SECRET}@db/app?{query}")
    assert problem in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"mysql://app:{SECRET}@db.internal:3306/app",
            "MySqlNamedLock('mysql://app:***@db.internal:3306/app')",
        ),
        (
            "mariadb://app@db/app?charset=utf8mb4",
            "MySqlNamedLock('mariadb://app@db/app?charset=utf8mb4')",
        ),
    ],
)
def test_repr_shows_the_redacted_url(url: str, shown: str) -> None:
    assert repr(MySqlNamedLock(url)) == shown


@pytest.mark.parametrize(
    "version",
    ["5.7.44-log", "8.0.36", "8.4.0-commercial", "8.0.mysql_aurora.3.05.2", "10.11.19-MariaDB"],
)
def test_mysql_5_7_and_later_and_mariadb_are_supported(version: str) -> None:
    assert unsupported_version(version) is None


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        ("5.6.51", "at most one named lock per session"),
        ("5.5.68-MariaDB", "at most one named lock per session"),
        ("PostgreSQL 16.2", "not a MySQL or MariaDB version"),
        ("", "not a MySQL or MariaDB version"),
    ],
)
def test_older_or_foreign_versions_are_refused(version: str, problem: str) -> None:
    reason = unsupported_version(version)
    assert reason is not None
    assert problem in reason


@pytest.mark.parametrize("charset", ["gbk", "big5", "sjis", "latin1", "utf8mb4"])
def test_a_charset_whose_codec_writes_ascii_is_accepted(charset: str) -> None:
    assert connection_arguments(f"mysql://app@db/app?charset={charset}")["charset"] == charset


@pytest.mark.parametrize("charset", ["swe7", "dec8", "binary"])
def test_a_charset_without_an_ascii_codec_is_refused_naming_it(charset: str) -> None:
    with pytest.raises(ConfigurationError, match=f"charset={charset} cannot carry") as caught:
        MySqlNamedLock(f"mysql://app:{SECRET}@db/app?charset={charset}")
    assert SECRET not in str(caught.value)


def test_init_command_is_passed_to_the_driver() -> None:
    command = "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'"
    url = "mysql://app@db/app?init_command=" + quote(command)
    assert connection_arguments(url)["init_command"] == command
